#!/usr/bin/env python3
"""The outside check of the graded exercises (tests/support/checked.h; docs/grading.md).

selftest(PROGRAM) (grader/selftest.py check PROGRAM, a CTest on the reference build): for each exercise PROGRAM
lists, its outputs read back pass, one changed byte, a cut file and a bad seed do not.

check_lab() (called by run_tests.py in ./lab grade): for each exercise the reference's checked_labNN lists, a
seed drawn now; the student's checked_labNN writes that exercise's outputs on the seed's inputs into a pipe,
in a sandbox of its own (grader/sandbox.py) and within the exercise's budget; the reference's
checked_labNN, outside any sandbox, draws the same inputs, computes its own outputs and compares. The verdict
goes to RUN_DIR/checked/LabNN_<exercise>, "passed" or "failed <why>", written here, never by graded code.
Standard library only.
"""
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import exercise_table  # noqa: E402
import processes  # noqa: E402
import sandbox  # noqa: E402
from processes import graded_env, last_said, listed  # noqa: E402,F401

MAX_OUTPUT = 64 << 20  # bytes of outputs taken from the student's process




def produce(program, exercise, seed, budget, hidden=(), sandboxed=True):
    """(outputs as bytes, why it failed or ""): @p program's outputs of @p exercise on @p seed's inputs."""
    program = Path(program).resolve()
    read_end, write_end = os.pipe()
    command = [str(program), "produce", exercise, str(seed), str(write_end)]
    if sandboxed:
        command = sandbox.wrap(command, hidden=hidden)
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, cwd=program.parent, env=graded_env(), stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT, pass_fds=[write_end])
        os.close(write_end)
        data, too_long = bytearray(), []

        def read():
            with os.fdopen(read_end, "rb") as pipe:
                while chunk := pipe.read(65536):
                    if len(data) + len(chunk) > MAX_OUTPUT:
                        too_long.append(True)
                        processes.kill_tree(process.pid)  # main thread reaps it
                        return
                    data.extend(chunk)

        reader = threading.Thread(target=read)
        reader.start()
        try:
            code = process.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            processes.end(process)
            code = None
        reader.join(10)
        said = last_said(log)
    if too_long:
        return bytes(data), f"it wrote more than {MAX_OUTPUT >> 20} MiB of outputs"
    if code is None:
        return bytes(data), f"it did not finish within {budget:g} s"
    if code != 0:
        return bytes(data), f"it ended with exit code {code}" + (f": {said}" if said else "")
    return bytes(data), ""


def compare(reference, exercise, seed, outputs_file, budget):
    """(0 passed | 1 differs | 2 the reference failed, its line): the reference program's verdict on the file."""
    try:
        done = subprocess.run([str(reference), "check", exercise, str(seed), str(outputs_file)], capture_output=True,
                              text=True, timeout=max(60, budget))
    except subprocess.TimeoutExpired:
        return 2, "the reference's check did not finish"
    line = (done.stdout.strip().splitlines() or [""])[-1] if done.returncode in (0, 1) else done.stderr.strip()
    return done.returncode, line


def check_lab(student, reference, lab, run_dir, budgets, hidden):
    """Checks every exercise of lab @p lab outside: writes RUN_DIR/checked/LabNN_<exercise>; prints progress."""
    folder = Path(run_dir) / "checked"
    folder.mkdir(parents=True, exist_ok=True)
    for exercise in listed(reference):
        seed = secrets.randbits(62)
        budget = budgets.get(exercise, 600)
        started = time.monotonic()
        data, why = (produce(student, exercise, seed, budget, hidden) if Path(student).exists()
                     else (b"", "its checked program was not built"))
        verdict = f"failed {why}" if why else ""
        if not why:
            outputs_file = folder / f"Lab{lab}_{exercise}.outputs"
            outputs_file.write_bytes(data)
            code, line = compare(reference, exercise, seed, outputs_file, budget)
            outputs_file.unlink()
            verdict = "passed" if code == 0 else f"failed {line}" if code == 1 else f"error {line}"
        (folder / f"Lab{lab}_{exercise}").write_text(f"{verdict} (seed {seed})\n")
        print(f"  Lab{lab}_{exercise}, checked outside: {verdict.split()[0]} ({time.monotonic() - started:.1f} s)",
              file=sys.stderr)


def listing_problems(program, lab):
    """Where @p program's lists differ from what the lab's table (tests/labNN/points.tsv, column outside) declares
    checked, timed and raced outside: a verdict under a name the table does not declare would be read by no one,
    and a declared check that does not run would leave its exercise unchecked. An exercise that needs a GPU is
    listed only by a program built for one, on a machine with one."""
    rows = exercise_table.read_table(lab)
    table = exercise_table.table_path(lab).relative_to(exercise_table.ROOT)
    problems = []
    for kind, command in (("checked", "list"), ("timed", "list-timed"), ("raced", "list-raced")):
        names = {line.split()[0] for line in listed(program, command)}
        declared = {row["exercise"] for row in rows if row["outside"] == kind}
        required = {row["exercise"] for row in rows if row["outside"] == kind and row["needs"] != "gpu"}
        problems += [f"{name}: `{program.name} {command}` lists it, but {table} does not declare it outside {kind}"
                     for name in sorted(names - declared)]
        problems += [f"{name}: {table} declares it outside {kind}, but `{program.name} {command}` does not list it"
                     for name in sorted(required - names)]
    return problems


def selftest(program):
    """The reference's outputs pass its own check; a changed byte, a cut file and a bad seed do not."""
    problems = listing_problems(program, program.name.removeprefix("checked_lab"))
    with tempfile.TemporaryDirectory() as scratch:
        for exercise in listed(program):
            seed = secrets.randbits(62)
            data, why = produce(program, exercise, seed, 300, sandboxed=False)
            if why:
                problems.append(f"{exercise}: produce failed: {why}")
                continue
            path = Path(scratch) / "outputs"
            changed = bytearray(data)
            changed[-5] ^= 0x40  # the last output's last byte (its highest, little-endian), before "end\n"
            for content, expected, what in ((data, 0, "its own outputs"), (bytes(changed), 1, "one changed byte"),
                                            (data[: len(data) // 2], 1, "the file cut in half")):
                path.write_bytes(content)
                code, line = compare(program, exercise, seed, path, 300)
                print(f"{exercise}, {what}: exit {code}: {line}")
                if code != expected:
                    problems.append(f"{exercise}: {what}: exit {code}, expected {expected} ({line})")
            code, _ = compare(program, exercise, "12x", path, 60)
            if code != 2:
                problems.append(f"{exercise}: a bad seed gave exit {code}, expected 2")
    for problem in problems:
        print("FAIL " + problem)
    return 1 if problems else 0
