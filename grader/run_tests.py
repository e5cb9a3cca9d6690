#!/usr/bin/env python3
"""Runs the graded tests of a build, each test in a sandbox of its own (./lab check, ./lab grade).

  run_tests.py BUILD RUN_DIR LAB...

Lists the graded tests (suites LabNN_<exercise>) of BUILD (the lists gtest_discover_tests wrote, read as
text) and runs each as its own process (in ./lab grade, not the speed tests that are timed or raced outside the
student's process, below: their verdict comes from there),
BUILD/labs/NN_topic/test_labNN_graded --gtest_filter=<test> from lab NN's own copy of BUILD, in its own sandbox
(grader/sandbox.py: unprivileged, its own PID namespace, no network, an allowlist of read-only folders, RUN_DIR
covered), two at a time, stopped at its exercise's budget per test (tests/labNN/points.tsv, budget_s). Each
process gets a socket and a token of its own (tests/support/test_main.cpp); after its sandbox is gone this
grader writes, outside it:
  RUN_DIR/junit.xml      one test case per test, from the process's exit status as this grader saw it
                         (CTest's JUnit format: status run, fail or notrun; exit code 77 = every test skipped);
  RUN_DIR/ends/<test>    the first record the process sent under its own token, keyed with the run's token
                         (SPEEDLABS_GRADE_TOKEN, which no test process sees) for results.py.
A test's output is kept up to 1 MiB (its first 768 KiB and its last 256 KiB).
With SPEEDLABS_CHECK_REFERENCE (./lab grade: the reference build tree), each lab that has tests/labNN/checked.cpp
then has its exercises checked outside the student's process (grader/outside_check.py), into
RUN_DIR/checked/, and its speed exercises timed (grader/outside_timing.py) or raced to a target
(grader/outside_race.py) outside it, into RUN_DIR/timed/.
Standard library only.
"""
import os
import re
import secrets
import socket
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import outside_check  # noqa: E402
import processes  # noqa: E402
import outside_race  # noqa: E402
import outside_timing  # noqa: E402
import sandbox  # noqa: E402
from results import read_points  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HEAD, TAIL = 768 << 10, 256 << 10


def hidden(run_dir, build):
    """What no graded process may see: the run's records, the grader's output folder, the answers (the
    reference, its programs in every other build tree, the Python references). The sandbox's allowlist leaves
    most of them out already; it covers those that lie inside a folder it mounts (the run's records)."""
    paths = [run_dir, ROOT / "solutions", ROOT / "docs" / "results", ROOT / ".cache", ROOT / "reference"]
    paths += [tree for tree in ROOT.glob("build*") if tree.is_dir() and tree.resolve() != Path(build).resolve()]
    if os.environ.get("SPEEDLABS_GRADE_OUT"):
        paths.append(os.environ["SPEEDLABS_GRADE_OUT"])
    return [str(p) for p in paths if os.path.exists(p)]


def list_tests(build, lab):
    """The graded tests gtest_discover_tests found in lab @p lab's test program (its *_tests.cmake, read as
    text: never run here, it was written while the student's code ran)."""
    names = []
    for path in sorted(build.glob(f"labs/{lab}_*/test_lab{lab}_graded*_tests.cmake")):
        if path.is_symlink() or not path.is_file():
            continue  # written by graded code: a link or a FIFO would have the grader read elsewhere, or wait
        with open(path, errors="replace") as handle:
            text = handle.read(16 << 20)
        names += re.findall(r"add_test\(\s*\[=\[(Lab\d\d_\w+\.[\w/.-]+)\]=\]", text)
    return list(dict.fromkeys(n for n in names if n.startswith(f"Lab{lab}_")))


def reference_checker(reference, lab):
    """The reference tree's outside check of lab @p lab (checked_labNN), or None where the lab has none."""
    if not (ROOT / f"tests/lab{lab}/checked.cpp").exists():
        return None
    return reference / "labs" / next(ROOT.glob(f"labs/{lab}_*")).name / f"checked_lab{lab}"


def timed_outside(reference, labs):
    """The suites (LabNN_<exercise>) of the speed exercises that ./lab grade times or races outside the student's
    process, as the reference tree's checkers list them: their tests inside that process are not run, since the
    outside verdict, on outputs it checks itself, takes the place of theirs (grader/results.py)."""
    suites = set()
    for lab in labs:
        checker = reference_checker(reference, lab)
        if checker is None:
            continue
        try:
            names = [row[0] for row in outside_timing.listed(checker)] + [s.name for s in outside_race.listed(checker)]
        except (OSError, RuntimeError, subprocess.SubprocessError, ValueError) as error:
            print(f"  lab {lab}: the reference's checker lists no timed exercise ({error}): its speed tests run "
                  "inside the student's process", file=sys.stderr)
            continue
        suites |= {f"Lab{lab}_{name}" for name in names}
    return suites


def read_bounded(stream, keep):
    """Reads @p stream to its end, keeping its first HEAD and last TAIL bytes in @p keep."""
    head, tail = bytearray(), bytearray()
    while chunk := stream.read(65536):
        room = HEAD - len(head)
        head += chunk[:room]
        tail = (tail + chunk[room:])[-TAIL:] if len(chunk) > room else tail
    keep.append(bytes(head) + (b"\n[... output cut ...]\n" + bytes(tail) if tail else b""))


def run_one(binary, name, budget, run_dir, build):
    """Runs test @p name of @p binary in its sandbox; (exit code or None on timeout, seconds, output, records)."""
    token = secrets.token_hex(16)
    mine, theirs = socket.socketpair()
    # Two tests share the machine: libtorch's OpenMP threads sleep at a barrier instead of spinning on a core the
    # other test needs (as ./lab test runs its shared tests).
    env = processes.graded_env() | {"SPEEDLABS_GRADE_FD": str(theirs.fileno()), "SPEEDLABS_GRADE_TOKEN": token,
                                    "OMP_WAIT_POLICY": "PASSIVE"}
    command = sandbox.wrap([str(binary), f"--gtest_filter={name}", "--gtest_also_run_disabled_tests"],
                           hidden=hidden(run_dir, build))
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=binary.parent, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, pass_fds=[theirs.fileno()])
    theirs.close()
    output, records = [], bytearray()
    reader = threading.Thread(target=read_bounded, args=(process.stdout, output))
    reader.start()
    mine.settimeout(0.2)
    code = None
    while code is None and time.monotonic() - started < budget:
        try:
            data = mine.recv(4096)
            records += data[: max(0, 65536 - len(records))]
        except socket.timeout:
            pass
        code = process.poll()
    seconds = time.monotonic() - started
    if code is None:
        processes.end(process)
    mine.settimeout(2)
    try:
        while data := mine.recv(4096):
            records += data[: max(0, 65536 - len(records))]
    except OSError:
        pass
    mine.close()
    reader.join(10)
    return code, seconds, (output[0] if output else b"").decode(errors="replace"), first_records(records, token)


def first_records(data, token):
    """The process's record as results.py reads it: start, then its first score and end (or signal)."""
    lines, kept = data.decode(errors="replace").splitlines(), []
    if "start" in lines:
        kept.append(("start",))
    for words in map(str.split, lines):
        if len(words) == 3 and words[1] == token:
            if words[0] == "score" and not any(k[0] == "score" for k in kept):
                kept.append(("score", words[2]))
            elif words[0] in ("end", "signal"):
                kept.append((words[0], words[2]))
                break
    return kept


def case_of(name, code, seconds, output, budget):
    case = ET.Element("testcase", name=name, classname=name.split(".")[0], time=f"{seconds:.3f}")
    if code == 0:
        case.set("status", "run")
    elif code == 77:
        case.set("status", "notrun")
        ET.SubElement(case, "skipped", message="every test that ran was skipped (exit code 77)")
    else:
        case.set("status", "fail")
        why = f"timed out after {budget:g} s" if code is None else f"exit code {code}"
        ET.SubElement(case, "failure", message=why)
    ET.SubElement(case, "system-out").text = re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f]", "?", output)
    return case


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    build, run_dir, labs = Path(argv[1]).resolve(), Path(argv[2]).resolve(), argv[3:]
    run_token = os.environ.get("SPEEDLABS_GRADE_TOKEN", "")
    budgets = {f"Lab{e.lab}_{e.name}": e.budget or 600 for lab in labs for e in read_points(lab)}
    reference = os.environ.get("SPEEDLABS_CHECK_REFERENCE")
    outside = timed_outside(Path(reference), labs) if reference else set()
    tests = []
    # Each lab's programs are run from its own copy of the tree, the one its code was built in.
    for name in [n for lab in labs for n in list_tests(sandbox.lab_copy(build, lab), lab)]:
        lab = name[3:5]
        binaries = sorted(sandbox.lab_copy(build, lab).glob(f"labs/{lab}_*/test_lab{lab}_graded"))
        suite_name = name.split(".")[0]
        if binaries and suite_name in budgets and suite_name not in outside:
            tests.append((binaries[0], name, budgets[suite_name]))
    (run_dir / "ends").mkdir(parents=True, exist_ok=True)
    suite = ET.Element("testsuite", name="graded", tests=str(len(tests)))

    def one(test):
        binary, name, budget = test
        code, seconds, output, records = run_one(binary, name, budget, run_dir, build)
        mark = "Passed" if code == 0 else "Skipped" if code == 77 else "Failed"
        print(f"  {name}: {mark} ({seconds:.1f} s)", file=sys.stderr)
        lines = [" ".join([r[0], run_token, *r[1:]]) for r in records]
        (run_dir / "ends" / name.replace("/", "_")).write_text("".join(line + "\n" for line in lines))
        return case_of(name, code, seconds, output, budget)

    with ThreadPoolExecutor(max_workers=2) as pool:
        for case in pool.map(one, tests):
            suite.append(case)
    (run_dir / "junit.xml").write_text(ET.tostring(suite, encoding="unicode") + "\n")
    # ./lab grade: each lab's exercises checked outside too, against the reference tree's program.
    for lab in labs if reference else []:
        ours = reference_checker(Path(reference), lab)
        if ours is None:
            continue
        exercise_budgets = {name[6:]: budget for name, budget in budgets.items() if name.startswith(f"Lab{lab}_")}
        student = sandbox.lab_copy(build, lab) / ours.relative_to(reference)
        outside_check.check_lab(student, ours, lab, run_dir, exercise_budgets, hidden(run_dir, build))
        outside_timing.time_lab(student, ours, lab, run_dir, exercise_budgets, hidden(run_dir, build))
        outside_race.race_lab(student, ours, lab, run_dir, exercise_budgets, hidden(run_dir, build))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
