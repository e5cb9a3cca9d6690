"""Kept runs (docs/results/labNN.json) for the lab pages (standard library only): making them (refresh), tying each
to the sources it was made from (fingerprint, provenance, stale_runs; see lab_pages.py's comment) and reading
them back (kept_report, kept_runs_by_machine, run_machine)."""
import datetime
import hashlib
import json
import math
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile

import lab_list  # scripts/driver/lab_list.py, beside this file
import speedrun_records  # the chart of the records, checked beside the kept runs' charts

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
CHARTS = ROOT / "docs" / "images"


def lab_folders():
    """labs/NN_topic/ folders in lab order."""
    return lab_list.lab_folders(ROOT)


def lab_folder(number):
    found = [f for f in lab_folders() if f.name[:2] == number]
    return found[0] if found else None


# ---------------------------------------------------------------------------------------------- refresh

def cpu_model():
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if platform.system() == "Darwin":
        out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    return platform.processor() or platform.machine()


def refresh(build, only):
    """Runs each lab's program with --quick --json and writes docs/results/labNN.json atomically."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    machine = {"cpu": cpu_model(), "logical_cpus": os.cpu_count(), "os": f"{platform.system()} {platform.release()}"}
    failed = []
    for folder in lab_folders():
        number = folder.name[:2]
        if only and number not in only:
            continue
        program = build / "bin" / f"lab{number}"
        if not program.exists():
            sys.exit(f"lab_pages: {program} not found: build first (./lab build)")
        # The flags as the program's --help gives them: the lab page's flag list comes from here, not from a copy.
        usage = subprocess.run([str(program), "--help"], capture_output=True, text=True, timeout=60)
        flags = flag_list(usage.stdout)
        with tempfile.TemporaryDirectory() as tmp:
            json_path, drawn = pathlib.Path(tmp) / "report.json", pathlib.Path(tmp) / "charts"
            argv = [str(program), "--quick", "--json", str(json_path)]
            if chart_flag(flags):  # the lesson's charts come from this run, never from another
                drawn.mkdir()
                argv += [chart_flag(flags), str(drawn)]
            print(f"lab_pages: lab {number}: {' '.join(argv[:2])} --json ...", flush=True)
            started = datetime.datetime.now(datetime.timezone.utc)
            load_before = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
            run = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=1800)
            seconds = (datetime.datetime.now(datetime.timezone.utc) - started).total_seconds()
            # 0: every must-hold observation holds, 1: one fails, 5: one could not be decided (the machine was
            # busy, or the samples scattered): real results, kept and shown; 2-4: no report.
            if run.returncode not in (0, 1, 5) or not json_path.exists():
                failed.append(number)
                print(f"lab_pages: lab {number} exited with {run.returncode}:\n{run.stderr[-2000:]}", file=sys.stderr)
                continue
            report = json.loads(json_path.read_text())
            charts = keep_charts(number, drawn) if chart_flag(flags) else {}
            if chart_flag(flags) and not charts:
                failed.append(number)
                print(f"lab_pages: lab {number} drew no chart under {chart_flag(flags)} (is gnuplot installed? "
                      "./lab setup installs it)", file=sys.stderr)
                continue
        report["flags"] = flags
        report["run"] = {"command": f"build/bin/lab{number} --quick --json", "exit_code": run.returncode,
                         "date": started.strftime("%Y-%m-%d"), "seconds": round(seconds, 1), **machine,
                         "load_average_before": load_before, **provenance(number), "charts": charts}
        report["run"]["content_sha256"] = content_checksum(report)
        target = RESULTS / f"lab{number}.json"
        partial = target.with_suffix(".json.partial")
        partial.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        partial.replace(target)
        print(f"lab_pages: wrote {target.relative_to(ROOT)} ({seconds:.0f} s, exit {run.returncode})", flush=True)
    if failed:
        sys.exit(f"lab_pages: no report from lab(s) {', '.join(failed)}")


def chart_flag(flags):
    """The flag under which a lab program draws its SVG charts into a folder (its help names one), or None."""
    return next((name for name, words in flags if ".svg" in words), None)


def chart_name(number, drawn):
    """A chart's name in docs/images: the program's own, with the lab's prefix where it has none."""
    return drawn if drawn.startswith(f"lab{number}_") else f"lab{number}_{drawn}"


def keep_charts(number, folder):
    """Copies each SVG the run drew in @p folder into docs/images (atomically, one by one); {name: its SHA-256},
    which the kept run records, so that a chart from any other run fails the docs check (chart_problems)."""
    CHARTS.mkdir(parents=True, exist_ok=True)
    kept = {}
    for drawn in sorted(folder.glob("*.svg")):
        name = chart_name(number, drawn.name)
        partial = CHARTS / (name + ".partial")
        shutil.copyfile(drawn, partial)
        partial.replace(CHARTS / name)
        kept[name] = hashlib.sha256((CHARTS / name).read_bytes()).hexdigest()
    return kept


def chart_problems():
    """Sentences, one per chart of docs/images that is not what a kept run drew: changed or missing since, or
    drawn by no kept run at all (a chart committed by hand, from some other run)."""
    problems, drawn = [], {}
    for path in sorted(RESULTS.glob("lab[0-9][0-9].json")):
        for name, digest in json.loads(path.read_text(encoding="utf-8")).get("run", {}).get("charts", {}).items():
            drawn[name] = path.stem[3:]
            chart = CHARTS / name
            if not chart.exists() or hashlib.sha256(chart.read_bytes()).hexdigest() != digest:
                problems.append(f"docs/images/{name} is not the chart the kept run docs/results/{path.name} drew: "
                                f"redraw it with {refresh_command(path.stem[3:])}")
    for chart in sorted(CHARTS.glob("*.svg")) if CHARTS.is_dir() else []:
        if chart.name == speedrun_records.PLOT.name:  # drawn from labs/13_speedrun/records.jsonl, not a kept run
            if chart.read_text(encoding="utf-8") != speedrun_records.records_plot():
                problems.append(f"docs/images/{chart.name} is not what the records draw: "
                                "python3 scripts/driver/speedrun_records.py writes it again")
        elif chart.name not in drawn:
            problems.append(f"docs/images/{chart.name}: no kept run drew it; a chart shows a kept run's numbers "
                            "(a lab that draws it takes --plots, and the refresh keeps what it drew)")
    return problems


def flag_list(usage):
    """Each flag of a lab program's --help as [flag, help], --help itself left out. CLI11 prints a flag and its
    type from column 2 and its help from column 30, on the same line or, when the flag is wider, on the next."""
    flags = []
    for line in usage.splitlines():
        if line.startswith("  -"):
            name = line.split()[0].split(",")[-1]
            same_line = len(line) > 30 and line[28:30] == "  " and line[30] != " "
            flags.append([name, line[30:].strip() if same_line else ""])
        elif flags and not flags[-1][1] and line.startswith(" " * 30):
            flags[-1][1] = line.strip()
    return [flag for flag in flags if flag[0] != "--help"]


# ---------------------------------------------------------------------------------------- provenance

def used_labs(number, seen=None):
    """The labs whose exercise lab NN runs (USES_EXERCISES in its CMakeLists.txt), followed through."""
    seen = set() if seen is None else seen
    folder = lab_folder(number)
    cmake = folder / "CMakeLists.txt" if folder else None
    if cmake and cmake.exists():
        match = re.search(r"USES_EXERCISES((?:\s+\d\d)+)", cmake.read_text(encoding="utf-8"))
        for used in (match.group(1).split() if match else []):
            if used not in seen:
                seen.add(used)
                used_labs(used, seen)
    return sorted(seen)


def fingerprint_roots(number):
    """The folders a kept run of lab NN depends on, relative to the repository (see the module's comment)."""
    roots = []
    for n in [number, *used_labs(number)]:
        folder = lab_folder(n)
        if folder:
            roots.append(f"labs/{folder.name}")
            if (ROOT / "solutions" / folder.name).is_dir():
                roots.append(f"solutions/{folder.name}")
    return roots + ["common", "datasets"]


def listed_files(root_rel):
    """The files under a folder as git lists them (tracked, or new and not ignored); every file there when
    this is not a git checkout (a scratch copy)."""
    folder = ROOT / root_rel
    git = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                          "--", root_rel], capture_output=True)
    inside = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if git.returncode == 0 and inside.returncode == 0 and pathlib.Path(inside.stdout.strip()).resolve() == ROOT:
        names = sorted({n for n in git.stdout.decode().split("\0") if n})
        return [ROOT / n for n in names if (ROOT / n).is_file()]
    return sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def fingerprint(number):
    digest = hashlib.sha256()
    for root_rel in fingerprint_roots(number):
        for path in listed_files(root_rel):
            if path.name in ("predictions.toml", "README.md", "README.md.in", "fixed-figures.tsv"):
                continue  # predictions and the lesson's page change what a page says, not what the lab measures
            digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def provenance(number):
    """What a kept run records about the code it was made from: the commit, whether the tree had changes
    beyond it, and the fingerprint of the sources it depends on."""
    def git(*args):
        out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else None
    return {"commit": git("rev-parse", "HEAD"), "uncommitted_changes": bool(git("status", "--porcelain")),
            "fingerprint": fingerprint(number), "fingerprint_of": fingerprint_roots(number)}


def content_checksum(report):
    """SHA-256 of a kept run's content (@p report, its run.content_sha256 left out), as canonical JSON: the
    fingerprint ties the run to the sources, this ties the numbers to the run as it was written, so a number
    edited by hand afterwards (the fingerprint unchanged) fails the docs build."""
    content = json.loads(json.dumps(report))
    content.get("run", {}).pop("content_sha256", None)
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def edited_runs():
    """Sentences, one per kept run whose content is not what its refresh wrote (run.content_sha256)."""
    problems = []
    for path in sorted(RESULTS.glob("lab[0-9][0-9].json")) + sorted(RESULTS.glob("*/lab[0-9][0-9].json")):
        report = json.loads(path.read_text(encoding="utf-8"))
        kept = report.get("run", {}).get("content_sha256")
        if kept == content_checksum(report):
            continue
        why = "its content checksum does not match: a number in it was changed after the run wrote it" if kept \
            else "it records no content checksum"
        problems.append(f"{path.relative_to(ROOT)}: {why}: a kept run is only ever written by "
                        f"{refresh_command(path.stem[3:])}")
    return problems


def refresh_command(number):
    return f"./lab docs --refresh-results {number}"


def stale_runs():
    """Sentences, one per lab whose kept run was not made from the sources as they are now."""
    problems = []
    for folder in lab_folders():
        number = folder.name[:2]
        path = RESULTS / f"lab{number}.json"
        if not path.exists():
            continue  # a new lab before its first kept run: check-ids reports it as skipped
        run = json.loads(path.read_text(encoding="utf-8")).get("run", {})
        kept = run.get("fingerprint")
        if kept == fingerprint(number):
            continue
        if kept:
            why = (f"made at commit {(run.get('commit') or '?')[:10]}; a file under "
                   f"{', '.join(fingerprint_roots(number))} has changed since")
        else:
            why = "it records no fingerprint of the sources it was made from"
        problems.append(f"lab {number}: the kept run docs/results/lab{number}.json is stale ({why}): "
                        f"rerun it with {refresh_command(number)} and commit it")
    return problems


# ------------------------------------------------------------------------------------------ reading back

def kept_report(number, cache={}):
    if number not in cache:
        path = RESULTS / f"lab{number}.json"
        cache[number] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
    return cache[number]


def kept_runs_by_machine():
    """{machine label: {lab number: report}}: docs/results/labNN.json, and docs/results/<folder>/labNN.json
    for kept runs of another machine (a GPU's)."""
    machines = {}
    for path in sorted(RESULTS.glob("lab[0-9][0-9].json")) + sorted(RESULTS.glob("*/lab[0-9][0-9].json")):
        report = json.loads(path.read_text(encoding="utf-8"))
        device = report.get("device", "?").split(" ")[0]
        label = f"{report['run']['cpu']}, {report['run']['logical_cpus']} logical CPUs ({device})"
        if device != "cpu" and report["run"].get("gpu"):
            label = f"{report['run']['gpu']} ({device})"
        machines.setdefault(label, {})[path.stem[3:]] = report
    return machines


def run_machine(report):
    """The machine of a kept run in words: "AMD EPYC, 2 logical CPUs, quiet (other programs used at most 0.05 of a
    core while it measured)": quiet or busy by what the run's timed observations read beside them (half a core,
    the verdicts' own limit), not by the load average, which still holds the lab run just before it."""
    run = report["run"]
    words = f"{run['cpu']}, {run['logical_cpus']} logical CPUs"
    others = [o["evidence"]["contention"]["others_cores"] for o in report["observations"]
              if isinstance(o.get("evidence"), dict) and "others_cores" in o["evidence"].get("contention", {})]
    load = run.get("load_average_before")
    if others:
        most = math.ceil(round(max(others) * 100, 6)) / 100  # rounded up: "at most" holds for the value printed
        words += (f", {'busy' if max(others) >= 0.5 else 'quiet'} (other programs used at most {most:.2f} of a "
                  "core while it measured)")
    elif isinstance(load, (int, float)):
        words += f", {'busy' if load >= 0.5 * max(1, run['logical_cpus']) else 'quiet'} (load {load:.2f} when it started)"
    return words
