#!/usr/bin/env python3
"""The graded tests' results read from a run (grader/grade.py): which exercise passed, failed, was
skipped or could not decide its speed, and why.

A run is what ./lab check and ./lab grade leave in RUN_DIR, written by the grader outside the sandboxes the
tests ran in (grader/run_tests.py): junit.xml (each test process's exit status as the grader saw it,
in CTest's JUnit format), builds/NN (how the build of lab NN's graded tests ended) and ends/<Suite.Test>, the
record the test's process sent over its socket under its own token (tests/support/test_main.cpp), keyed by
the grader with the run's token (SPEEDLABS_GRADE_TOKEN in the environment; no test process sees it):
"start TOKEN", then "end TOKEN passed|failed|skipped" once GoogleTest finished the test, or "signal TOKEN N".
A test passes only when its record ends "passed" AND its process exited 0: a test that stops early
(std::exit(0) is exit code 0), loops until its budget, or crashes never does, whatever it printed. A skip
counts only when GoogleTest itself recorded it (GTEST_SKIP(): no GPU here).

A lab's graded tests are the GoogleTest suites Lab<NN>_<exercise>; tests/lab<NN>/points.tsv gives each
exercise's points, README anchor and time budget per test (budget_s, the tests' CTest TIMEOUT; read by
exercise_table). An exercise
passes when every test of its suite passed and, where ./lab grade checked it outside the student's process
(RUN_DIR/checked/), that check passed; a skipped test makes it skipped, never passed.
Standard library only.
"""
import math
import os
import re
import signal
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import exercise_table  # beside this file, as the grader's other modules

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Exercise:
    lab: str
    name: str
    points: float
    anchor: str
    budget: float = 0
    passed: int = 0
    failed: list = field(default_factory=list)   # (test name, message)
    skipped: list = field(default_factory=list)  # (test name, reason)
    scores: list = field(default_factory=list)   # (test name, share of the points 0..1) of a passed speed test
    undecided: list = field(default_factory=list)  # (test name, why): a speed test that could not decide
    build: str = "built"  # how its graded tests' build ended (build_outcome): built, compile_error, ...
    gpu: bool = False  # needs a GPU (points.tsv's needs column): graded only where checked outside the student
    outside_only: bool = False  # its only pass is the outside timing's checked score (no test of it ran inside)

    @property
    def status(self):
        if self.failed:
            return "failed"
        if self.skipped:
            return "skipped"
        if self.undecided:
            return "undecided"
        return "passed" if self.passed else "missing"

    @property
    def share(self):
        """The share of the points a passed exercise earns: 1, or its speed tests' lowest score."""
        return min([1.0] + [score for _, score in self.scores])

    def readme(self):
        folder = next(ROOT.glob(f"labs/{self.lab}_*"))
        return f"{folder.relative_to(ROOT)}/README.md" + (f"#{self.anchor}" if self.anchor else "")


def read_points(lab):
    return [Exercise(lab, row["exercise"], float(row["points"]), row["readme_anchor"], float(row["budget_s"] or 0),
                     gpu=row["needs"] == "gpu") for row in exercise_table.read_table(lab)]


def gpu_only_outside(run, exercises):
    """./lab grade: a GPU exercise counts only where this grader checked it outside the student's process
    (RUN_DIR/checked/LabNN_<exercise>, written only where the grader has a CUDA GPU and the exercise has an
    outside check); anywhere else it is graded 0 of 0, skipped, whatever its test process recorded."""
    for e in exercises:
        if e.gpu and not (Path(run) / "checked" / f"Lab{e.lab}_{e.name}").is_file():
            e.failed, e.passed, e.scores, e.undecided = [], 0, [], []
            e.skipped = [(f"Lab{e.lab}_{e.name}", "needs a GPU, and this grader could not check it outside your "
                                                  "process (no CUDA GPU here, or no outside check for it): not graded")]


STUB = re.compile(r"not implemented yet: TODO\(lab\d+\)[^\n\"]*")


def first_failure(output):
    """The first assertion message of a failed GoogleTest test, without the noise around it."""
    stub = STUB.search(output)
    if stub:
        return "still a stub: " + stub.group(0)
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if re.search(r"(Failure|error:)$", line.strip()) or "C++ exception" in line or "Expected" in line:
            body = [l for l in lines[i + 1 if line.strip().endswith("Failure") else i:] if l.strip()]
            message = []
            for l in body:
                if l.startswith("[  FAILED  ]") or l.startswith("[       OK ]") or re.search(r"\.cpp:\d+: Failure", l):
                    break
                message.append(l.strip())
                if len(message) == 8:
                    break
            return " | ".join(message)
    tail = [l for l in lines if l.strip()][-3:]
    return "the test failed without an assertion message: " + " | ".join(tail) if tail else "no output"


def signal_name(number):
    try:
        return f"{signal.Signals(number).name} ({signal.strsignal(number) or number})"
    except ValueError:
        return f"signal {number}"


def harness_lines(run, name):
    """The lines of the test's own record (RUN_DIR/ends/<name>) written under this run's token, as words;
    [] when there is no token, no record, or none of its lines is the harness's of this run."""
    token = os.environ.get("SPEEDLABS_GRADE_TOKEN", "")
    try:
        lines = (Path(run) / "ends" / name.replace("/", "_")).read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [words for words in map(str.split, lines) if token and len(words) >= 2 and words[1] == token]


def own_record(run, name):
    """What the test's own record says under this run's token: passed, failed, skipped, ("signal", N),
    "started" (it began and never ended) or None (it never began)."""
    record = None
    for words in harness_lines(run, name):
        if words[0] == "start" and record is None:
            record = "started"
        elif words[0] == "end" and len(words) == 3 and words[2] in ("passed", "failed", "skipped"):
            record = words[2]
        elif words[0] == "signal" and len(words) == 3 and words[2].isdigit():
            record = ("signal", int(words[2]))
    return record


def own_score(run, name):
    """The speed score the harness recorded for a test under this run's token (tests/support/test_main.cpp:
    "score TOKEN 0.73" or "score TOKEN undecided"), or None. The test records it through GoogleTest's
    RecordProperty; nothing a test prints counts."""
    score = None
    for words in harness_lines(run, name):
        if words[0] != "score" or len(words) != 3:
            continue
        if words[2] == "undecided":
            score = "undecided"
            continue
        try:
            value = float(words[2])
        except ValueError:
            continue
        score = min(1.0, max(0.0, value)) if math.isfinite(value) else 0.0
    return score


PRINTED_SCORE = re.compile(r"^speed score: (undecided|[0-9.]+)", re.M)


GTEST_BANNER = re.compile(r"^(\[[ =-]+\]|\[ RUN +\]|Note: Google Test filter|Running main\(\))")


def last_lines(output, count=3):
    """The test's own last lines, without GoogleTest's banners."""
    tail = [l.strip() for l in output.splitlines() if l.strip() and not GTEST_BANNER.match(l.strip())][-count:]
    return "its last output: " + " | ".join(tail) if tail else "no output from the test"


def verdict(case, exercise, output, run):
    """(passed|failed|skipped, why) for one test case."""
    status = case.get("status")
    exited_zero = status == "run" and case.find("failure") is None and case.find("error") is None
    exited_skip = status in ("notrun", "disabled") or case.find("skipped") is not None
    if run is None:  # --ctest-verdicts: the reference solutions, as ./lab test ran them
        if not exited_zero and not exited_skip:
            return "failed", first_failure(output)
        if exited_skip:
            reason = re.search(r"Skipped\s*\n?(.*)", output)
            return "skipped", (reason.group(1).strip() if reason else "") or "skipped"
        return "passed", ""
    record = own_record(run, case.get("name", ""))
    if record == "passed" and exited_zero:
        return "passed", ""
    if record == "skipped" and exited_skip:
        reason = re.search(r"Skipped\s*\n?(.*)", output)
        return "skipped", (reason.group(1).strip() if reason else "") or "skipped"
    if record == "failed":
        return "failed", first_failure(output)
    if record in ("passed", "skipped"):
        return "failed", ("the test ended, but its process then failed (a crash or an exit code after the test: "
                          "a static destructor?); " + last_lines(output))
    if isinstance(record, tuple):
        return "failed", f"crashed with signal {signal_name(record[1])}; " + last_lines(output)
    seconds = float(case.get("time") or 0)
    if exercise.budget and seconds >= exercise.budget - 0.05 and status != "run":
        return "failed", (f"timed out after {exercise.budget:g} s (this exercise's budget per test; a loop that "
                          "never ends?); " + last_lines(output))
    if record == "started":
        return "failed", ("the test process ended before the test did (std::exit, exit, _exit or abort in the "
                          "code under test?), whatever its exit code; " + last_lines(output))
    return "failed", ("the test never started: the test program ended before it (a crash in a static "
                      "initializer?); " + last_lines(output))


def build_outcome(run, lab):
    """How the build of lab @p lab's graded tests ended in @p run (RUN_DIR/builds/NN, written by ./lab): built,
    compile_error (the code does not compile), crashed_at_start (the test program linked, then died while
    its tests were listed: a static initializer), build_timeout (stopped at its time limit) or
    build_wrote_too_much (stopped at its limit on what it writes); built when the
    run has no such file."""
    try:
        return (Path(run) / "builds" / lab).read_text().strip() or "built"
    except OSError:
        return "built"


def read_results(junit_path, exercises, run=None):
    """Fills @p exercises from CTest's JUnit at @p junit_path and, in a graded run (@p run: RUN_DIR), each
    test's own record and its lab's build outcome; returns the graded suites no points.tsv line names."""
    by_suite = {f"Lab{e.lab}_{e.name}": e for e in exercises}
    for e in exercises if run is not None else []:
        e.build = build_outcome(run, e.lab)
    unknown = []
    for case in ET.parse(junit_path).getroot().iter("testcase"):
        name = case.get("name", "")
        suite = name.split(".", 1)[0]
        exercise = by_suite.get(suite)
        if exercise is None:
            if re.match(r"Lab\d+_", suite):
                unknown.append(suite)
            continue
        output = "".join(case.findtext(tag) or "" for tag in ("system-out", "system-err"))
        result, why = verdict(case, exercise, output, run)
        if result == "failed":
            exercise.failed.append((name, why))
        elif result == "skipped":
            exercise.skipped.append((name, why))
        else:
            exercise.passed += 1
            # A speed test's share of the points: the harness's record under this run's token, never the test's
            # output; only --ctest-verdicts (the reference as ./lab test ran it, no records) reads the printed line.
            if run is not None:
                score = own_score(run, name)
            else:
                printed = PRINTED_SCORE.findall(output)
                score = (printed[-1] if printed[-1] == "undecided" else float(printed[-1])) if printed else None
            if run is not None and score is None and exercise.name.endswith("_speed"):
                # Only the harness records a speed score, after the timed calls' results were checked; an end
                # with none was not the harness's (a forged end line) or the measurement never finished.
                exercise.passed -= 1
                exercise.failed.append((name, "the test ended without its speed score (the harness records it once "
                                              "the timed calls' results are checked): nothing to score"))
            elif score == "undecided":
                reason = re.search(r"could not decide: ([^\n]*)", output)
                exercise.undecided.append((name, reason.group(1).strip() if reason else "the machine was busy"))
            elif score is not None:
                exercise.scores.append((name, score))
    for e in exercises if run is not None else []:
        outside = outside_verdict(run, e)
        if outside:
            e.failed.append((f"Lab{e.lab}_{e.name}, checked outside your process on fresh inputs", outside))
        apply_outside_timing(run, e)
    # Speed counts only on right results: a speed exercise scores only when the exercise it times passes.
    timed = {(e.lab, e.name): e for e in exercises}
    for e in exercises:
        base = timed.get((e.lab, e.name.removesuffix("_speed"))) if e.name.endswith("_speed") else None
        if base is not None and base.status != "passed" and e.status in ("passed", "undecided"):
            e.failed.append((f"Lab{e.lab}_{e.name}", f"speed is scored only on right results, and {base.name} "
                                                     f"did not pass ({base.status})"))
    return sorted(set(unknown))


def outside_verdict(run, e):
    """Why exercise @p e failed its outside check in @p run (RUN_DIR/checked/LabNN_<exercise>, written by the
    grader from the reference's comparison: grader/outside_check.py), or "" (passed, or not checked)."""
    try:
        line = (Path(run) / "checked" / f"Lab{e.lab}_{e.name}").read_text(errors="replace").strip()
    except OSError:
        return ""
    if line.startswith("passed"):
        return ""
    word, _, why = line.partition(" ")
    return why if word == "failed" else f"the outside check could not run: {why}"


def apply_outside_timing(run, e):
    """A speed exercise timed outside the student's process (RUN_DIR/timed/LabNN_<name>, written by the grader:
    grader/outside_timing.py): its verdict takes the place of the graded test inside that process, whose code can
    bend its own clock (./lab grade does not run that test; ./lab check, which times nothing outside, does)."""
    try:
        lines = (Path(run) / "timed" / f"Lab{e.lab}_{e.name}").read_text(errors="replace").splitlines()
    except OSError:
        return
    word, _, why = (lines[0] if lines else "").strip().partition(" ")
    how = lines[1].strip() if len(lines) > 1 else "timed outside"  # or "raced outside"
    test = f"Lab{e.lab}_{e.name}, {how} your process"
    if word == "score" and not e.failed:
        share, _, how = why.partition(" ")
        e.scores, e.undecided = [(f"{test} {how}", min(1.0, max(0.0, float(share))))], []
        e.outside_only = e.passed == 0
        e.passed = max(e.passed, 1)  # a score comes only after the timed calls' outputs were checked right
    elif word == "undecided" and not e.failed:
        e.scores, e.undecided = [], [(test, why)]
    elif word in ("failed", "error"):
        e.scores, e.undecided = [], []
        e.failed.append((test, why if word == "failed" else f"the outside timing could not run: {why}"))


def tests_passed(e):
    """"N tests passed", or what passed where the exercise's only test ran outside the student's process."""
    if e.outside_only:
        return "its outputs checked and its speed measured outside your process"
    return f"{e.passed} test{'s' if e.passed > 1 else ''} passed"


def message(e):
    """The line that says how exercise @p e ended and, when it failed, what to read."""
    if e.status == "passed" and e.scores:
        test, score = min(e.scores, key=lambda t: t[1])
        return f"{tests_passed(e)}; speed against this machine's best: {score:.0%} of the points ({test})"
    if e.status == "passed":
        return tests_passed(e)
    if e.status == "undecided":
        test, why = e.undecided[0]
        return (f"{test}: the speed measurement could not decide after its retries ({why}): not scored on this "
                "run; grade again on a quiet machine")
    if e.status == "missing" and e.build == "compile_error":
        return f"your code does not compile: the compiler's errors are above, all of them in .cache/check-build-{e.lab}.log"
    if e.status == "missing" and e.build == "crashed_at_start":
        return ("your code compiles, but the test program crashed before any test started (listing the tests "
                f"runs the static initializers: one of yours?); its output is in .cache/check-build-{e.lab}.log")
    if e.status == "missing" and e.build == "program_replaced":
        return ("not graded: while your code built, its test or checked program was replaced by a link or by "
                "something other than the file the build made")
    if e.status == "missing" and e.build == "build_timeout":
        return ("not graded: the build of your code ran past its time limit (SPEEDLABS_SANDBOX_BUILD_S, 600 s by "
                f"default) and was stopped; its output is in .cache/check-build-{e.lab}.log")
    if e.status == "missing" and e.build == "build_wrote_too_much":
        return ("not graded: the build of your code wrote more than its limit (SPEEDLABS_SANDBOX_WRITE_MB, 4096 MiB "
                f"by default) and was stopped; its output is in .cache/check-build-{e.lab}.log")
    if e.status == "missing":
        return "no graded test ran (was the build interrupted?)"
    if e.status == "skipped":
        return "skipped: " + e.skipped[0][1]
    test, why = e.failed[0]
    more = f" (+{len(e.failed) - 1} more failing)" if len(e.failed) > 1 else ""
    return f"{test}: {why}{more}; see {e.readme()}"


def exercises_of(labs):
    """The exercises of @p labs, each lab once however often it is named."""
    return [e for lab in dict.fromkeys(labs) for e in read_points(lab)]
