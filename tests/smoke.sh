#!/usr/bin/env bash
# tests/smoke.sh JSON PROGRAM [ARGS...]: runs a lab program end to end (it writes its observations to
# JSON) and passes when it exits 0 (every must-hold observation holds) or 5 (none fails, but this run
# could not decide one: a busy machine or scattered timings). It prints how many observations the run
# could not decide, so a loaded run shows what it refused; any other exit code fails.
#
# The lab runs once between the tour and the tests: where the tour (./lab run) already ran this program, unchanged
# since, with these arguments (BUILD/runs/labNN.json and the labNN.run it wrote beside it), that run is this test's
# run (its report copied to JSON, its exit code taken), and the test says so.
set -u
json=$1
shift
program=$1
lab=$(basename "$program")
runs="$(dirname "$(dirname "$program")")/runs"

# The tour's run, when it is this run: same program (not rebuilt since), same arguments less --json.
tour_run() {
  [[ -f "$runs/$lab.json" && -f "$runs/$lab.run" ]] || return 1
  [[ "$runs/$lab.json" -nt "$program" ]] || return 1
  python3 - "$runs/$lab.run" "$runs/$lab.json" "$@" <<'PY'
import json, sys
record, report, argv = sys.argv[1], sys.argv[2], sys.argv[4:]
wanted, skip = [], False
for a in argv:  # this test's arguments less its --json PATH
    if skip:
        skip = False
    elif a == "--json":
        skip = True
    else:
        wanted.append(a)
ran = json.load(open(record))
device = json.load(open(report)).get("device")
# --device cpu asks for what the tour's default picked on a machine without a GPU
if str(device).startswith("cpu") and "--device" in wanted and wanted[wanted.index("--device") + 1] == "cpu":
    i = wanted.index("--device")
    wanted = wanted[:i] + wanted[i + 2:]
sys.exit(0 if ran["args"] == wanted and ran["exit"] in (0, 1, 5) else 1)
PY
}

if tour_run "$@"; then
  cp -- "$runs/$lab.json" "$json"
  code=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["exit"])' "$runs/$lab.run")
  echo "smoke: the tour's run of $lab ($(date -r "$runs/$lab.json" '+%H:%M:%S')), not run again"
else
  "$@"
  code=$?
fi
undecided=$(python3 -c 'import json, sys
print(sum(o["verdict"] == "inconclusive" for o in json.load(open(sys.argv[1]))["observations"]))' "$json" 2>/dev/null)
echo "smoke: exit $code; observations this run could not decide: ${undecided:-unknown}"
[[ $code -eq 0 || $code -eq 5 ]]
