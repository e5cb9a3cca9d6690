#!/usr/bin/env python3
"""Turns the graded tests' JUnit XML (from ctest --output-junit) into what a student or an instructor reads.

  grade.py check JUNIT LAB...            one line per exercise of each lab; exit 0 when all pass, else 1
  grade.py grade JUNIT OUT_DIR LAB...    OUT_DIR/summary.md, OUT_DIR/results.json (Gradescope's format)

A lab's graded tests are the GoogleTest suites Lab<NN>_<exercise>; the points of each exercise are in
tests/lab<NN>/points.tsv (exercise, points, README anchor). An exercise passes when every test of its
suite passed; a skipped test (a GPU test on a machine without a GPU) makes it skipped, never passed.
Standard library only, so it runs on any Python 3 without the .venv.
"""
import json
import os
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Labs whose code did not compile (set by ./lab check and ./lab grade): their tests never ran.
BROKEN_LABS = set(os.environ.get("SPEEDLABS_BROKEN_LABS", "").split())


@dataclass
class Exercise:
    lab: str
    name: str
    points: float
    anchor: str
    passed: int = 0
    failed: list = field(default_factory=list)   # (test name, message)
    skipped: list = field(default_factory=list)  # (test name, reason)

    @property
    def status(self):
        if self.failed:
            return "failed"
        if self.skipped:
            return "skipped"
        return "passed" if self.passed else "missing"

    def readme(self):
        folder = next(ROOT.glob(f"labs/{self.lab}_*"))
        return f"{folder.relative_to(ROOT)}/README.md" + (f"#{self.anchor}" if self.anchor else "")


def read_points(lab):
    path = ROOT / f"tests/lab{lab}/points.tsv"
    if not path.exists():
        return []
    rows = [line.split("\t") for line in path.read_text().splitlines()[1:] if line.strip()]
    return [Exercise(lab, row[0], float(row[1]), row[2].strip() if len(row) > 2 else "") for row in rows]


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


def read_results(junit_path, exercises):
    by_suite = {f"Lab{e.lab}_{e.name}": e for e in exercises}
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
        skipped = case.find("skipped")
        if case.find("failure") is not None or case.find("error") is not None or case.get("status") == "fail":
            exercise.failed.append((name, first_failure(output)))
        elif skipped is not None or case.get("status") in ("notrun", "disabled"):
            reason = re.search(r"Skipped\s*\n?(.*)", output)
            exercise.skipped.append((name, (reason.group(1).strip() if reason else "") or "skipped"))
        else:
            exercise.passed += 1
    return sorted(set(unknown))


def message(e):
    if e.status == "passed":
        return f"{e.passed} test{'s' if e.passed > 1 else ''} passed"
    if e.status == "missing" and e.lab in BROKEN_LABS:
        return f"your code does not compile: the compiler's errors are above, all of them in .cache/check-build-{e.lab}.log"
    if e.status == "missing":
        return "no graded test ran (was the build interrupted?)"
    if e.status == "skipped":
        return "skipped: " + e.skipped[0][1]
    test, why = e.failed[0]
    more = f" (+{len(e.failed) - 1} more failing)" if len(e.failed) > 1 else ""
    return f"{test}: {why}{more}; see {e.readme()}"


def check(junit, labs):
    exercises = [e for lab in labs for e in read_points(lab)]
    unknown = read_results(junit, exercises)
    for lab in labs:
        mine = [e for e in exercises if e.lab == lab]
        print(f"lab {lab}:" if mine else f"lab {lab}: no graded exercises")
        for e in mine:
            label = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP", "missing": "FAIL"}[e.status]
            if e.failed and e.failed[0][1].startswith("still a stub"):
                label = "TODO"
            print(f"  {label}  {e.name:<28} {message(e)}")
    for suite in unknown:
        print(f"  note: graded suite {suite} has no line in its points.tsv", file=sys.stderr)
    done = all(e.status in ("passed", "skipped") for e in exercises)
    return 0 if done and exercises else 1


def grade(junit, out_dir, labs):
    exercises = [e for lab in labs for e in read_points(lab)]
    read_results(junit, exercises)
    tests = []
    for e in exercises:
        # A skipped exercise (no GPU here) is not graded on this machine: it counts neither way.
        graded = e.status != "skipped"
        tests.append({
            "name": f"lab {e.lab}: {e.name}",
            "score": e.points if e.status == "passed" else 0,
            "max_score": e.points if graded else 0,
            "status": "passed" if e.status == "passed" else "failed",
            "output": ("skipped, not graded here: " if not graded else "") + message(e),
        })
    score = sum(t["score"] for t in tests)
    total = sum(t["max_score"] for t in tests)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_atomically(out / "results.json", json.dumps({"score": score, "tests": tests}, indent=2) + "\n")
    rows = ["| lab | exercise | points | result |", "|---|---|---|---|"]
    for e, t in zip(exercises, tests):
        rows.append(f"| {e.lab} | {e.name} | {t['score']:g} / {e.points:g} | {e.status} |")
    rows.append(f"| | **total** | **{score:g} / {total:g}** | |")
    write_atomically(out / "summary.md", "\n".join(rows) + "\n")
    print("\n".join(rows))
    return 0


def write_atomically(path, text):
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    temporary.replace(path)


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3:]))
    if len(sys.argv) >= 5 and sys.argv[1] == "grade":
        sys.exit(grade(sys.argv[2], sys.argv[3], sys.argv[4:]))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
