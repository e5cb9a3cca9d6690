#!/usr/bin/env bash
# CI: the fuzz targets of tests/fuzz (libFuzzer with ASan and UBSan, built with clang): first every input
# of the committed corpus once (the seeds, and any crash found before, kept there as a regression test),
# then a bounded run of each target from that corpus. A crash, a property that does not hold, a leak or
# a hang fails CI; the input that did it is kept in build-fuzz/artifacts/ and printed.
#
#   scripts/ci/ci-fuzz.sh              SPEEDLABS_FUZZ_SECONDS (default 30) per target
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
source scripts/driver/common.sh
command -v clang++ >/dev/null || die "clang++ not found: ./lab setup installs it (Debian: clang)"
seconds=${SPEEDLABS_FUZZ_SECONDS:-30}
# The targets load GPT-2's real vocabulary, as the labs do.
[[ -f "$(data_dir)/gpt2/encoder.json" && -f "$(data_dir)/gpt2/vocab.bpe" ]] ||
  die "no GPT-2 vocabulary in $(data_dir): run ./lab setup or set SPEEDLABS_DATA_DIR"
export SPEEDLABS_DATA_DIR="$(data_dir)"
build="$root/build-fuzz"
mkdir -p "$root/.cache"
CXX=clang++ cmake -S tests/fuzz -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$root/.cache/configure-fuzz.log" 2>&1 ||
  { cat "$root/.cache/configure-fuzz.log" >&2; die "configuring the fuzz targets failed"; }
cmake --build "$build"
mkdir -p "$build/artifacts"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT   # new inputs found in this run; the committed corpus is never changed
status=0
for target in tokenizer token_cache vocabulary; do
  program="$build/fuzz_$target" corpus="tests/fuzz/corpus/$target"
  say "fuzz_$target: the committed corpus once, then ${seconds}s of fuzzing"
  mkdir -p "$work/$target"
  options=(-timeout=10 -rss_limit_mb=2048 -artifact_prefix="$build/artifacts/$target-")
  if ! "$program" "${options[@]}" -runs=0 "$corpus" >"$work/$target.log" 2>&1 ||
     ! "$program" "${options[@]}" -max_total_time="$seconds" -print_final_stats=1 "$work/$target" "$corpus" \
         >>"$work/$target.log" 2>&1; then
    tail -n 40 "$work/$target.log" >&2
    echo "fuzz_$target failed: the input is in $build/artifacts/ (add it to $corpus and make it a test)" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|Done [0-9]+ runs" "$work/$target.log" | tail -n 2
  fi
done
exit $status
