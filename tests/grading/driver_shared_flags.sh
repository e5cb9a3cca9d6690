#!/usr/bin/env bash
# tests/grading/driver_shared_flags.sh ROOT: every driver command that runs a lab program takes the shared flags
# (--quick, --device D, --json PATH) as the README states them, on a scratch checkout whose lab programs are
# stand-ins that refuse a second --json as CLI11 does: the user's --json is written where they said (relative to
# where ./lab was called), and the driver's own copy of the report is still kept.
set -euo pipefail
source_root="$1"
scratch="$(mktemp -d)"
trap 'rm -rf -- "$scratch"' EXIT
mkdir -p "$scratch/scripts/driver" "$scratch/grader" "$scratch/bin" "$scratch/torch" "$scratch/caller" "$scratch/tests/lab01" \
  "$scratch/tests/lab02"
cp "$source_root/lab" "$scratch/"
cp "$source_root"/scripts/driver/{common.sh,build_estimate.py,tour_report.py} "$scratch/scripts/driver/"
cp "$source_root/grader/build.sh" "$scratch/grader/"
printf 'exit 0\n' >"$scratch/scripts/driver/setup.sh"
touch "$scratch/torch/TorchConfig.cmake" "$scratch/tests/lab01/points.tsv" "$scratch/tests/lab02/points.tsv"
printf '#!/bin/sh\nexit 0\n' >"$scratch/bin/cmake"  # every build is already done
chmod +x "$scratch/bin/cmake"
# A lab program: what it was given into its --json report; a second --json is CLI11's usage error (exit 2).
stand_in='#!/usr/bin/env bash
json="" count=0 previous=""
for a in "$@"; do
  [[ "$previous" == --json ]] && { json="$a"; count=$((count + 1)); }
  [[ "$a" == --json=* ]] && { json="${a#--json=}"; count=$((count + 1)); }
  previous="$a"
done
((count <= 1)) || { echo "--json: At Most 1 required but received $count" >&2; exit 2; }
[[ -z "$json" ]] || printf "{\"lab\": \"%s\", \"args\": \"%s\", \"observations\": []}\n" "${0##*lab}" "$*" >"$json"'
for lab in 01_vectorize 02_float16_limits 13_speedrun; do
  mkdir -p "$scratch/labs/$lab"
  printf '# lab %s\n' "${lab:0:2}" >"$scratch/labs/$lab/README.md"
  for tree in build build-student; do
    mkdir -p "$scratch/$tree/bin" && touch "$scratch/$tree/build.ninja"
    printf '%s\n' "$stand_in" >"$scratch/$tree/bin/lab${lab:0:2}" && chmod +x "$scratch/$tree/bin/lab${lab:0:2}"
  done
done
export PATH="$scratch/bin:$PATH" Torch_DIR="$scratch/torch"
cd "$scratch/caller"
expect="$source_root/tests/expect_exit.sh"
has() { grep -q -- "$2" "$1" || { echo "$1 lacks '$2': $(cat "$1" 2>&1)" >&2; exit 1; }; }

# ./lab run NN with each shared flag: the user's report where they said, the driver's kept beside it.
"$scratch/lab" run 02 --quick --json out.json
has out.json '"args": "--quick --json out.json"'
has "$scratch/build-student/runs/lab02.json" '"lab": "02"'
"$scratch/lab" run 02 --json=eq.json --device cpu
has eq.json '--device cpu'
rm "$scratch/build-student/runs/lab02.json"
"$scratch/lab" run 02 --device cpu
has "$scratch/build-student/runs/lab02.json" '--device cpu --json'

# The speedrun: its --json was the driver's and collided with the user's.
"$scratch/lab" speedrun --quick --json sr.json
has sr.json '--quick --json sr.json --plots'
has "$scratch/build-student/runs/lab13.json" '"lab": "13"'
"$scratch/lab" speedrun --device cpu
has "$scratch/build-student/runs/lab13.json" '--device cpu'

# The tour: --device reaches every lab, --quick is its own size, --json gets every lab's report in one file.
"$scratch/lab" run --quick --device cpu --json tour.json
python3 - tour.json <<'PY'
import json, sys
tour = json.load(open(sys.argv[1]))["tour"]
assert [r["lab"] for r in tour] == ["01", "02", "13"], tour
assert all("--quick --device cpu --json" in r["args"] for r in tour), tour
PY
has "$scratch/build/runs/lab01.json" '"lab": "01"'

# Bad input: exit 2 and a message, before anything runs.
bash "$expect" 2 "takes only the shared flags" "$scratch/lab" run --quick --bogus
bash "$expect" 2 "--device needs a value" "$scratch/lab" run --device
bash "$expect" 2 "cannot write a file there" "$scratch/lab" run --json /no/such/folder/t.json
bash "$expect" 2 "unknown flag to ./lab check" "$scratch/lab" check 02 --bogus
bash "$expect" 2 "name one lab" "$scratch/lab" check 01 02 --json two.json
bash "$expect" 2 "runs no lab program" "$scratch/lab" grade --quick
echo "the shared flags: ok"
