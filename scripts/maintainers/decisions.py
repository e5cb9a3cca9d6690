#!/usr/bin/env python3
"""How often each lab's must-hold observations decide, quiet and alone (docs/maintainers.md's table).

    decisions.py [--runs N] [--labs 01,13]      (default: 10 runs of every lab built in build/bin)

Runs every lab program N times as the tour runs it (--quick, the smoke run's arguments from
build/labs/NN_topic/labNN.smoke.args), the labs in turn in each round so that a burst of other work falls on one
run of each, and counts per must-hold observation the runs whose verdict decided (holds or fails) against those
that could not decide; one not applicable here (a GPU's) is left out. Prints a Markdown table: per lab the
must-hold observations that apply, the fewest runs any of them decided in, which one, and why it did not decide
the last time it did not. Run it on a quiet machine: it measures
what a quiet machine decides. The reports go to a temporary folder, removed at the end; an interrupted run stops
its lab program's whole process group first (workers included). Standard library only.

Bad input (a --runs that is not a positive number, a lab with no program in build/bin) stops with exit 2.
"""
import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
DECIDED = ("holds", "fails")


def refuse(message):
    print(f"decisions: error: {message}", file=sys.stderr)
    sys.exit(2)


def lab_programs(wanted):
    """[(NN, program, smoke arguments)] of the labs built in build/bin (those in @p wanted, if any)."""
    labs = []
    for folder in sorted((ROOT / "labs").glob("[0-9][0-9]_*")):
        number = folder.name[:2]
        if wanted and number not in wanted:
            continue
        program = BUILD / "bin" / f"lab{number}"
        if not program.is_file():
            refuse(f"{program} is not built (./lab build)")
        args_file = BUILD / "labs" / folder.name / f"lab{number}.smoke.args"
        extra = [a for a in args_file.read_text().splitlines() if a] if args_file.is_file() else []
        labs.append((number, program, extra))
    missing = sorted(set(wanted) - {number for number, _, _ in labs})
    if missing:
        refuse(f"no lab {', '.join(missing)} here")
    return labs


def run_once(program, extra, report):
    """The must-hold observations of one --quick run: {id: (verdict, reason)}."""
    process = subprocess.Popen([str(program), "--quick", "--json", str(report), *extra], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        process.wait()
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)  # the lab program and every worker it started
        process.wait()
        raise
    if not report.is_file():
        return {"(the run)": ("no report", f"exit code {process.returncode}")}
    observations = json.loads(report.read_text())["observations"]
    return {o["id"]: (o.get("verdict"), o.get("reason", "")) for o in observations if o.get("must_hold")}


def table(tallies, runs):
    lines = ["| lab | must-hold observations | decided in every run | fewest decided | the one, and why not |",
             "|---|---|---|---|---|"]
    for number, counts in tallies.items():
        fewest = min(counts.items(), key=lambda item: item[1][0]) if counts else None
        every = sum(1 for decided, _ in counts.values() if decided == runs)
        if fewest is None:
            lines.append(f"| {number} | 0 | - | - | - |")
            continue
        name, (decided, why) = fewest
        lines.append(f"| {number} | {len(counts)} | {every} | {decided} of {runs} | "
                     f"{'-' if decided == runs else f'`{name}`: ' + why.replace('|', '/')} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--labs", default="")
    options = parser.parse_args()
    if options.runs < 1:
        parser.error("--runs must be 1 or more")
    wanted = {f"{int(n):02d}" for n in options.labs.split(",") if n.strip().isdigit()}
    if options.labs and len(wanted) != len([n for n in options.labs.split(",") if n]):
        parser.error(f"--labs takes lab numbers separated by commas, not '{options.labs}'")
    labs = lab_programs(wanted)
    tallies = {number: {} for number, _, _ in labs}  # {lab: {id: [decided runs, last reason]}}
    with tempfile.TemporaryDirectory(prefix="speedlabs-decisions-") as folder:
        for run in range(options.runs):
            for number, program, extra in labs:
                report = pathlib.Path(folder) / f"lab{number}.{run}.json"
                for ident, (verdict, reason) in run_once(program, extra, report).items():
                    if verdict == "not_applicable":
                        continue  # not a question this machine can ask (a GPU's, say): neither decided nor not
                    count = tallies[number].setdefault(ident, [0, ""])
                    if verdict in DECIDED:
                        count[0] += 1
                    else:
                        count[1] = reason or verdict
                print(f"decisions: run {run + 1} of {options.runs}, lab {number} done", file=sys.stderr, flush=True)
    print(table({n: {i: tuple(c) for i, c in t.items()} for n, t in tallies.items()}, options.runs))


if __name__ == "__main__":
    main()
