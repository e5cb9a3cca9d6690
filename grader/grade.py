#!/usr/bin/env python3
"""Turns a run of the graded tests into what a student or an instructor reads.

  grade.py check --run RUN_DIR LAB...              one line per exercise of each lab, then its predictions;
                                                   exit 0 when every exercise passes, else 1
  grade.py grade --run RUN_DIR OUT_DIR LAB...      OUT_DIR/summary.md, OUT_DIR/results.json (Gradescope's format)
                                                   and OUT_DIR/junit.xml: all three, or none
  grade.py grade --ctest-verdicts JUNIT OUT_DIR LAB...   the same from CTest's verdicts alone (CI's check of the
                                                   reference solutions, from ./lab test's own JUnit)

RUN_DIR is what ./lab check and ./lab grade leave inside the build tree they graded (build-student/check-run,
build-submission/grade-run): junit.xml, builds/NN and ends/<Suite.Test> (grader/results.py says
what each holds and how a test passes). JUNIT is a build tree's ctest-junit.xml. Predictions are compared by
the reference build's `predictions` program (build/bin/predictions; grader/predicted.py), never
by one of the graded tree, where graded code ran.

The path a maintainer follows: read_results (results.py) fills each exercise from the run; predicted
(predicted.py) gives each lab's predictions; check prints both, grade scores both and writes the
three files (output.py).
Standard library only, so it runs on any Python 3 without the .venv.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from output import junit_with_predictions, write_all_or_none  # noqa: E402
from predicted import predicted, prediction_line, prediction_points, tool_of  # noqa: E402
from results import Exercise, exercises_of, gpu_only_outside, message, own_score, read_results  # noqa: E402,F401

LABELS = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP", "missing": "FAIL", "undecided": "UNDECIDED"}


def check(junit, labs, run, tool):
    """./lab check's lines: each exercise of @p labs from @p junit (and the run @p run), then the lab's
    predictions compared with the student's own run by @p tool. 0 when every exercise passed (or was skipped
    or undecided), else 1."""
    labs = list(dict.fromkeys(labs))
    exercises = exercises_of(labs)
    unknown = read_results(junit, exercises, run)
    for lab in labs:
        mine = [e for e in exercises if e.lab == lab]
        print(f"lab {lab}:" if mine else f"lab {lab}: no graded exercises")
        for e in mine:
            label = "TODO" if e.failed and e.failed[0][1].startswith("still a stub") else LABELS[e.status]
            print(f"  {label}  {e.name:<28} {message(e)}")
        p = predicted(lab, tool, mine=True)
        if p.error:
            print(f"  PREDICT error  {p.error} (the exercises above are checked all the same)")
        for row in p.rows:
            print(prediction_line(row))
        if any(row["answer"] is not None for row in p.rows):
            print(f"  (predictions compared with {p.where})")
    for suite in unknown:
        print(f"  note: graded suite {suite} has no line in its points.tsv", file=sys.stderr)
    done = all(e.status in ("passed", "skipped", "undecided") for e in exercises)
    return 0 if done and exercises else 1


def exercise_part(e):
    """results.json's test for exercise @p e. A skipped exercise (no GPU here) is not graded on this machine: it
    counts neither way; nor does a speed test that could not decide (a busy machine), which says so."""
    graded = e.status not in ("skipped", "undecided")
    points = round(e.points * e.share, 2) if e.status == "passed" else 0
    return {"name": f"lab {e.lab}: {e.name}", "score": points, "max_score": e.points if graded else 0,
            "status": "passed" if e.status == "passed" and points == e.points else "failed",
            "output": ("skipped, not graded here: " if e.status == "skipped" else "") + message(e)}


def predictions_part(p, each):
    """(results.json's test, summary.md's row, JUnit cases) for lab predictions @p p at @p each point per
    question within its tolerance. A question this machine did not measure counts neither way."""
    measured = [r for r in p.rows if r["verdict"] != "unmeasured"]
    right = sum(1 for r in measured if r["verdict"] == "ok")
    maximum = each * (len(p.official) - (len(p.rows) - len(measured)))
    score = 0 if p.error else each * right
    lines = [p.error] if p.error else [prediction_line(r).strip() for r in p.rows]
    test = {"name": f"lab {p.lab}: predictions", "score": score, "max_score": maximum,
            "status": "passed" if score == maximum else "failed",
            "output": "\n".join(lines + ([f"compared with {p.where}"] if measured else []))}
    row = (f"| {p.lab} | predictions ({right} of {len(p.official)} within tolerance) | {score:g} / {maximum:g} | "
           f"{'malformed file' if p.error else 'predicted'} |")
    cases = [(p.lab, r["name"], r["verdict"], prediction_line(r).strip()) for r in p.rows]
    cases += [(p.lab, "file", "off", p.error)] if p.error else []
    return test, row, cases


def grade(junit, out_dir, labs, run, tool):
    """./lab grade: scores @p labs' exercises from @p junit (and the run @p run) and their predictions
    (compared by @p tool with this machine's reference run), and writes OUT_DIR's three files. 0, or 2 when
    they could not be written."""
    exercises = exercises_of(labs)
    read_results(junit, exercises, run)
    if run is not None:
        gpu_only_outside(run, exercises)
    tests = [exercise_part(e) for e in exercises]
    rows = ["| lab | exercise | points | result |", "|---|---|---|---|"]
    rows += [f"| {e.lab} | {e.name} | {t['score']:g} / {e.points:g} | {e.status} |" for e, t in zip(exercises, tests)]
    each, cases = prediction_points(), []
    for lab in dict.fromkeys(labs) if each > 0 else []:
        p = predicted(lab, tool)
        if not p.official and not p.error:
            continue
        test, row, lab_cases = predictions_part(p, each)
        tests.append(test)
        rows.append(row)
        cases += lab_cases
    score = sum(t["score"] for t in tests)
    rows.append(f"| | **total** | **{score:g} / {sum(t['max_score'] for t in tests):g}** | |")
    try:
        write_all_or_none(Path(out_dir), {
            "results.json": json.dumps({"score": score, "tests": tests}, indent=2) + "\n",
            "summary.md": "\n".join(rows) + "\n",
            "junit.xml": junit_with_predictions(junit, cases),
        })
    except OSError as error:
        print(f"[lab] error: cannot write the results into {out_dir}: {error}; none of them was kept", file=sys.stderr)
        return 2
    print("\n".join(rows))
    return 0


def main(argv):
    args = argv[1:]
    if len(args) >= 3 and args[0] in ("check", "grade") and args[1] in ("--run", "--ctest-verdicts"):
        command, mode, source, rest = args[0], args[1], args[2], args[3:]
        run = source if mode == "--run" else None
        junit = str(Path(source) / "junit.xml") if run else source
        # The reference build's program, never the graded tree's: graded code ran in that tree.
        tool = tool_of(Path(__file__).resolve().parents[1] / "build")
        if command == "check" and rest:
            return check(junit, rest, run, tool)
        if command == "grade" and len(rest) >= 2:
            return grade(junit, rest[0], rest[1:], run, tool)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
