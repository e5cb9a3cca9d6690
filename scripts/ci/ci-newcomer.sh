#!/usr/bin/env bash
# CI's newcomer check: `./lab run` on the clean clone, as a newcomer types it after setup. The tour builds and
# runs lab 01's program first, then builds the other labs' programs in one build and runs them; this prints how
# long lab 01's first table took to appear and how long the whole tour took (the goals: 5 and 8 minutes with a
# cold compiler cache, setup included).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
start=$SECONDS
first_table="" tour_code=""
# Every line passes through; the first table's header line is timed as it arrives.
while IFS= read -r line; do
  if [[ "$line" =~ ^tour\ exit\ code:\ ([0-9]+)$ ]]; then tour_code="${BASH_REMATCH[1]}"; continue; fi
  printf '%s\n' "$line"
  if [[ -z "$first_table" && "$line" == "Observations for 01_"* ]]; then
    first_table=$((SECONDS - start))
  fi
done < <(code=0; ./lab run 2>&1 || code=$?; echo "tour exit code: $code")
echo "newcomer: lab 01's first table after ${first_table:-never} s, the whole tour in $((SECONDS - start)) s"
[[ -n "$first_table" ]] || { echo "lab 01 printed no table" >&2; exit 1; }
[[ "$tour_code" == 0 ]] || { echo "the tour exited with ${tour_code:-nothing} (a lab failed: above)" >&2; exit 1; }
