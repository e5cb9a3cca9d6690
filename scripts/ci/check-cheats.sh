#!/usr/bin/env bash
# CI's check that the grader cannot be fooled (called by scripts/ci/check-grading.sh):
#   1. a submission made of the reference answers with known attacks in labs 01, 02, 03, 04, 05, 09, 10 and 14
#      (tests/grading/cheats/submission.py: exit(0), an endless loop, a printed "[  SKIPPED ]", a segfault,
#      a crash in a static initializer, a compile error, the reference reached through __has_include, the
#      record's token forged from /proc/self/fd or /proc/self/environ or taken by a static initializer, a
#      daemon that outlives its test and writes into build/ and results.json, answers wrong only at the speed
#      tests' sizes, lab 10's all-reduce skipped for larger models, a static initializer reaching for /proc/sys, a
#      host folder anyone may write, .git and solutions/, lab 02's exercise and the predictions program in the
#      graded tree, a GPU exercise's pass forged from its own record) graded by ./lab grade --submission: each
#      attacked exercise scores 0, every other exercise its full points; lab 01 is named three ways (--labs 01,1,001) and must be
#      graded once; no process of the grade is left, build/ holds no planted file and results.json is
#      unchanged after it;
#   2. a submission file that is a symbolic link to the reference is refused (exit 2), and an honest
#      submission graded right after the cheating one earns the full points of labs 02, 04 and 05 (lab 05's
#      graded tests once read a file the sandbox hides, and an honest lab 05 lost 20 points; lab 04's outside
#      check runs threads in the sandbox); a submission one folder off is graded as the stubs with a warning;
#   3. a right but slow lab 01 and lab 10, and lab 13's stub trainer, each with a clock_gettime of its own, which fools a
#      timing in its process, earn no speed points: the speed is timed (grader/outside_timing.py) or raced
#      (grader/outside_race.py) outside it; lab 13's trainer also starts a helper that spins on the race's CPU
#      whenever the trainer is stopped (the baseline's turn), which earns nothing as long as the race stops the
#      whole sandbox (and, were a helper to escape the stop, the load it makes leaves the race undecided);
#   4. limits: a fork bomb and a memory hog (lab 12) and a build that never ends (lab 08) cost their labs' points
#      with the reason in the row, and the grade goes on (--labs 12,08: a later lab first);
#   5. SIGTERM to ./lab grade while a test runs ends the grader and the test processes at once, and leaves
#      none of the three result files (an earlier run's included).
# Only the attacked labs' graded tests are built (build-submission/), from ccache where the reference build
# compiled the same sources.
set -euo pipefail
check_start=$SECONDS
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
source scripts/driver/common.sh
# Each part's heading says how long the check has run, so that a slow part shows in CI's log.
part() { echo "check-cheats ($((SECONDS - check_start)) s so far): $*"; }

scratch="$root/build-cheats"
rm -rf "$scratch" && mkdir -p "$scratch"
python3 tests/grading/cheats/submission.py write "$scratch/submission"
# The canary's folder: on the host anyone may write into it; a graded process that reached it escaped its sandbox.
mkdir -p "$scratch/open" && chmod 1777 "$scratch/open"

part "./lab grade on the cheating submission"
./lab grade --submission "$scratch/submission" --labs 01,1,001,02,03,04,05,09,10,14 --out "$scratch/grade" >"$scratch/grade.log" 2>&1 ||
  { cat "$scratch/grade.log" >&2; die "./lab grade failed on the cheating submission"; }
python3 tests/grading/cheats/submission.py verify "$scratch/grade/results.json" ||
  { cat "$scratch/grade.log" >&2; die "a cheat earned points, or cost an honest exercise its points (above)"; }
# No process of the grade outlives it (a double-forked setsid daemon waited to rewrite results.json), and
# nothing the graded code wrote is read: the daemon's planted files are not there.
sleep 2
left="$(pgrep -x speedlabs-cheat || true)"
[[ -z "$left" ]] || die "a process of the graded code outlived the grade: $left"
python3 tests/grading/cheats/submission.py verify "$scratch/grade/results.json" >/dev/null ||
  die "results.json changed after ./lab grade had exited"
[[ ! -e "$root/build/labs/02_float16_limits/lab02.smoke.json.planted" ]] || die "the graded code wrote into the reference build tree"
[[ -z "$(ls -A "$scratch/open")" ]] || die "the graded code wrote outside its sandbox: $(ls -A "$scratch/open")"
cmp -s "$scratch/submission/02_float16_limits/exercise.cpp" build-submission/exercises/02_float16_limits/exercise.cpp ||
  die "lab 01's code rewrote the graded tree's copy of lab 02's exercise"
echo "  no canary, lab 02's exercise as submitted, blank predictions scored 0"

part "a submission file that is a symbolic link to the reference is refused (exit 2)"
mkdir -p "$scratch/linked/02_float16_limits"
ln -s "$root/solutions/02_float16_limits/exercise.cpp" "$scratch/linked/02_float16_limits/exercise.cpp"
status=0
./lab grade --submission "$scratch/linked" --labs 02 --out "$scratch/linked-grade" >"$scratch/linked.log" 2>&1 || status=$?
((status == 2)) && grep -q "symbolic link" "$scratch/linked.log" || { cat "$scratch/linked.log" >&2; die "a symlinked submission file was not refused (exit $status)"; }

part "an honest submission (labs 05, 04 and 02: a later lab first) graded right after the cheating one earns its points"
python3 tests/grading/cheats/submission.py honest "$scratch/honest"
./lab grade --submission "$scratch/honest" --labs 05,04,02 --out "$scratch/honest-grade" >"$scratch/honest.log" 2>&1 ||
  { cat "$scratch/honest.log" >&2; die "./lab grade failed on the honest submission"; }
python3 - "$scratch/honest-grade/results.json" <<'PY' || { cat "$scratch/honest.log" >&2; die "the honest submission lost points after the cheating one"; }
import json, sys
# Every exercise graded here (lab 04's GPU reduction is skipped without a GPU: no points either way).
tests = [t for t in json.load(open(sys.argv[1]))["tests"] if not t["name"].endswith(": predictions")
         and "skipped" not in t["output"]]
short = [f"{t['name']} {t['score']:g}/{t['max_score']:g}" for t in tests if t["score"] != t["max_score"]]
print("  honest labs 02, 04 and 05: " + (", ".join(short) or "every exercise its full points"))
sys.exit(1 if short or not tests else 0)
PY

part "a right but slow lab 01, lab 10 and lab 13 trainer hiding their time behind their own clock_gettime (and a" \
  "helper spinning in the baseline's turns) earn no speed points"
python3 tests/grading/cheats/submission.py clock "$scratch/clock"
./lab grade --submission "$scratch/clock" --labs 01,10,13 --out "$scratch/clock-grade" >"$scratch/clock.log" 2>&1 ||
  { cat "$scratch/clock.log" >&2; die "./lab grade failed on the clock submission"; }
python3 tests/grading/cheats/submission.py verify-clock "$scratch/clock-grade/results.json" ||
  { cat "$scratch/clock.log" >&2; die "a clock that hides the exercise's time earned speed points (above)"; }

part "a fork bomb and a 4 GiB memory hog (lab 12, memory limited to 2 GiB), a build that never ends (lab 08, limited to 20 s)"
python3 tests/grading/cheats/submission.py limits "$scratch/limits"
SPEEDLABS_SANDBOX_BUILD_S=20 SPEEDLABS_SANDBOX_MEMORY_MB=2048 ./lab grade --submission "$scratch/limits" --labs 12,08 --out "$scratch/limits-grade" \
  >"$scratch/limits.log" 2>&1 || { cat "$scratch/limits.log" >&2; die "./lab grade failed on the limits submission"; }
python3 tests/grading/cheats/submission.py verify-limits "$scratch/limits-grade/results.json" ||
  { cat "$scratch/limits.log" >&2; die "a limit did not stop its attack with a clear row (above)"; }

part "lab 01's program swapped for a link to the reference build's while it builds is not graded"
python3 tests/grading/cheats/submission.py link "$scratch/link"
./lab grade --submission "$scratch/link" --labs 01 --out "$scratch/link-grade" >"$scratch/link.log" 2>&1 ||
  { cat "$scratch/link.log" >&2; die "./lab grade failed on the link submission"; }
python3 tests/grading/cheats/submission.py verify-link "$scratch/link-grade/results.json" ||
  { cat "$scratch/link.log" >&2; die "a program linked to the reference's was graded (above)"; }

part "a submission one folder off (FOLDER/labs/NN_topic/) is graded as the stubs, and said"
mkdir -p "$scratch/nested" && cp -r "$scratch/honest" "$scratch/nested/labs"
./lab grade --submission "$scratch/nested" --labs 02 --out "$scratch/nested-grade" >"$scratch/nested.log" 2>&1 ||
  { cat "$scratch/nested.log" >&2; die "./lab grade failed on the nested submission"; }
grep -q "holds no exercise file.*give $scratch/nested/labs" "$scratch/nested.log" ||
  { cat "$scratch/nested.log" >&2; die "a submission with no exercise file where one is read was graded without a word"; }

part "SIGTERM to ./lab grade while lab 01's endless loop runs"
stopped="$scratch/stopped"
mkdir -p "$stopped" && echo stale >"$stopped/results.json" && echo stale >"$stopped/summary.md"
looping="test_lab01_graded --gtest_filter=Lab01_sum_squares_torch"
./lab grade --submission "$scratch/submission" --labs 01 --out "$stopped" >"$scratch/stopped.log" 2>&1 &
driver=$!
for _ in $(seq 600); do
  pgrep -f "$looping" >/dev/null && break
  sleep 0.1
done
pgrep -f "$looping" >/dev/null || { kill "$driver"; die "the looping test never started"; }
started=$SECONDS
kill -TERM "$driver"
status=0
wait "$driver" || status=$?
((status == 143)) || { cat "$scratch/stopped.log" >&2; die "./lab grade exited $status on SIGTERM, not 143"; }
sleep 0.5
left="$(pgrep -f "$root/build-submission/labs/01_vectorize/test_lab01_graded|run_tests.py|sandbox.py" || true)"
[[ -z "$left" ]] || { ps -o pid,args -p "${left//$'\n'/,}" >&2; die "processes left running after SIGTERM (above)"; }
leftover="$(ls -A "$stopped")"
[[ -z "$leftover" ]] || die "an interrupted grade left files in --out: $leftover"
echo "  stopped in $((SECONDS - started)) s, no test process left, no result file left"
echo "check-cheats: $((SECONDS - check_start)) s"
