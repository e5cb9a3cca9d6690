#!/usr/bin/env bash
# CI's check that grading can tell a student's work from none, both ways:
#   1. with the labs/ stubs and blank predictions as they are, ./lab grade gives no points: every graded test
#      fails, every prediction is blank, and the number of failing graded tests is printed (lab 13's stub is a
#      working trainer: it earns its contract's points and none for speed);
#   2. the same graded tests, linked with the reference solutions, graded by the same grader/grade.py, give
#      full points for every exercise graded on this machine (GPU ones are skipped here), speed included, and
#      with the reference predictions (solutions/NN_topic/predictions.toml) right against ./lab test's --quick runs
#      (each question's answer, machine-dependent ones included); results.json
#      has Gradescope's fields. Their results come from the JUnit file the last ./lab test wrote
#      (build/ctest-junit.xml, the default test preset's): CI's ./lab test has just run every graded test
#      with the solutions, and running them again would only repeat its answer. That file has no record of
#      each test's end (./lab test is no grading run), so it is graded on CTest's verdicts (--ctest-verdicts);
#   3. the grader cannot be fooled: known cheating submissions score 0 on what they attack and leave the
#      other exercises their points; SIGTERM stops a grade at once (scripts/ci/check-cheats.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
source scripts/driver/common.sh

verify() {  # verify RESULTS_JSON JUNIT stubs|solutions
  python3 - "$@" <<'PY'
import json, re, sys, xml.etree.ElementTree as ET
results, junit, variant = sys.argv[1:]
data = json.load(open(results))
assert isinstance(data.get("score"), (int, float)), "results.json: no numeric top-level score"
tests = data.get("tests")
assert tests, "results.json: no tests[]"
for t in tests:
    missing = {"name", "score", "max_score", "status", "output"} - t.keys()
    assert not missing, f"results.json: test {t.get('name')} lacks {sorted(missing)}"
    assert t["status"] in ("passed", "failed"), t
# Graded tests only (suites LabNN_<exercise>): ./lab test's file holds every test of the suite.
cases = [c for c in ET.parse(junit).getroot().iter("testcase") if re.match(r"Lab\d\d_", c.get("name", ""))]
assert cases, f"{junit}: no graded test (LabNN_*) in it"
failed = [c for c in cases if c.find("failure") is not None or c.get("status") == "fail"]
skipped = [c for c in cases if c.find("skipped") is not None or c.get("status") in ("notrun", "disabled")]
passed = len(cases) - len(failed) - len(skipped)
parts = [t for t in tests if t["name"].endswith(": predictions")]
assert parts, "results.json: no lab has a predictions part"
right = sum(t["score"] for t in parts)
asked = sum(t["max_score"] for t in parts)
print(f"{variant}: predictions {right:g} of {asked:g} points over {len(parts)} labs")
speed = [t for t in tests if t["name"].endswith("_speed")]
print(f"{variant}: speed " + (", ".join(f"{t['name']} {t['score']:g}/{t['max_score']:g}" for t in speed) or "none graded"))
if variant == "stubs":
    assert right == 0 and asked > 0, "the blank predictions earn points"
else:
    # Every reference answer must be right against this run of the same configuration: ./lab test's quiet
    # --quick runs (build/labs/*/labNN.smoke.json; the loaded pass writes elsewhere), as it must be against every
    # kept run (tests/grading/test_predictions.py). An observation this run could not decide grades no answer.
    sys.path.insert(0, "grader")
    import os
    import predicted as graded
    os.environ["SPEEDLABS_PREDICTIONS_DIR"] = "solutions"
    wrong = []
    for path in sorted(__import__("glob").glob("solutions/*/predictions.toml")):
        lab = path.split("/")[1][:2]
        p = graded.predicted(lab, graded.tool_of("build"))
        assert not p.error, f"lab {lab}: {p.error}"
        assert p.where == "this machine's --quick run", f"lab {lab}: graded against {p.where}, not this run"
        for q in p.rows:
            if q["verdict"] == "unmeasured" and "could not decide" in q["detail"]:
                continue
            if q["verdict"] != "ok":
                kind = "machine-dependent" if q["machine_dependent"] else "machine-independent"
                wrong.append(f"lab {lab} {q['name']} ({kind}): {q['verdict']} ({q['detail']})")
    assert not wrong, "the reference predictions miss this run's answers: " + "; ".join(wrong)
    print(f"{variant}: every reference answer holds against this machine's --quick runs")
    right = asked = 0  # their points are checked above, question by question
    tests = [t for t in tests if t not in parts]
graded = [t for t in tests if t["max_score"] > 0]
total = sum(t["max_score"] for t in graded)
earned = sum(t["score"] for t in graded)
print(f"{variant}: {len(cases)} graded tests: {passed} passed, {len(failed)} failed, {len(skipped)} skipped; "
      f"score {earned:g} of {total:g} over {len(graded)} exercises graded here")
if variant == "stubs":
    # Lab 13's stub is a working trainer, the baseline's own recipe (a fresh clone races and scores about 1): it
    # keeps the contract and reaches the target, and its speed earns nothing. Every other lab's stubs pass nothing.
    working = [c for c in cases if c.get("name", "").startswith("Lab13_") or c.get("classname", "").startswith("Lab13_")]
    assert passed - len([c for c in working if c not in failed and c not in skipped]) == 0, \
        f"{passed} graded tests pass without the student's code"
    others = sum(t["score"] for t in tests if not t["name"].startswith("lab 13:"))
    speed13 = sum(t["score"] for t in tests if t["name"] == "lab 13: make_trainer_speed")
    assert others == 0 and speed13 == 0, "the stubs earn points (lab 13's stub: speed points)"
else:
    assert not failed, "the reference solutions fail graded tests: " + ", ".join(c.get("name") for c in failed)
    assert earned == total > 0, "the reference solutions do not get full points: " + ", ".join(
        f'{t["name"]} {t["score"]:g}/{t["max_score"]:g}' for t in graded if t["score"] != t["max_score"])
PY
}

# A question's why sits beside the student's blank answer: it must not state the reference answer.
python3 scripts/driver/predictions.py whys

grading_start=$SECONDS
echo "check-grading: the labs/ stubs"
./lab grade --out build-student/grade-stubs >/dev/null
verify build-student/grade-stubs/results.json build-student/grade-stubs/junit.xml stubs

echo "check-grading ($((SECONDS - grading_start)) s so far): the reference solutions, from ./lab test's run (build/ctest-junit.xml)"
junit="$root/build/ctest-junit.xml"
[[ -f "$junit" ]] || die "no $junit: run ./lab test first (it writes that file)"
mapfile -t ids < <(for points in tests/lab[0-9][0-9]/points.tsv; do basename "$(dirname "$points")" | cut -c4-5; done)
out="$root/build/grade-solutions"
rm -rf "$out" && mkdir -p "$out"
# The reference predictions (solutions/NN_topic/predictions.toml) in place of the blank ones.
SPEEDLABS_PREDICTIONS_DIR="$root/solutions" python3 grader/grade.py grade --ctest-verdicts "$junit" "$out" "${ids[@]}" >/dev/null
verify "$out/results.json" "$junit" solutions

echo "check-grading ($((SECONDS - grading_start)) s so far): the cheats"
bash scripts/ci/check-cheats.sh
