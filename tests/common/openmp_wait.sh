#!/usr/bin/env bash
# tests/common/openmp_wait.sh LAB_PROGRAM: a lab that starts beside a busy core, with no OMP_WAIT_POLICY, starts
# again as itself with PASSIVE (common/cli.cpp), and its JSON says so; a policy its user chose is kept. (That a
# quiet machine keeps libgomp's spinning is not checked here: ctest may run another test beside this one.)
set -euo pipefail
program="$1"
scratch="$(mktemp -d)"
python3 -c 'while True: pass' &
hog=$!
trap 'kill "$hog" 2>/dev/null || true; rm -rf -- "$scratch"' EXIT
policy_of() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["omp_wait_policy"])' "$1"; }
sleep 0.5  # the hog is running before the lab looks

env -u OMP_WAIT_POLICY "$program" --quick --json "$scratch/busy.json" >/dev/null
[[ "$(policy_of "$scratch/busy.json")" == PASSIVE ]] ||
  { echo "beside a busy core the lab ran under '$(policy_of "$scratch/busy.json")', not PASSIVE" >&2; exit 1; }
OMP_WAIT_POLICY=ACTIVE "$program" --quick --json "$scratch/chosen.json" >/dev/null
[[ "$(policy_of "$scratch/chosen.json")" == ACTIVE ]] ||
  { echo "the user's ACTIVE became '$(policy_of "$scratch/chosen.json")'" >&2; exit 1; }
echo "beside a busy core: PASSIVE; a policy chosen: kept"
