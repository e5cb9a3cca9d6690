#!/usr/bin/env bash
# CI: AddressSanitizer and UndefinedBehaviorSanitizer (the asan preset) on the shared code every lab
# stands on: common/ (result files, the process runner, the flags, the timer, the curves, the plots) and
# datasets/ (the tokenizer, the token cache, the manifest and the data files), through their tests.
# Any error report stops the test that made it and fails CI. The labs' own tests train models for
# seconds to minutes; ten times slower under the sanitizers they would not fit CI's budget.
#
#   scripts/ci/ci-sanitizers.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
source scripts/driver/common.sh
export_torch_prefix
cmake --preset asan >"$root/.cache/configure-asan.log" 2>&1 || { cat "$root/.cache/configure-asan.log" >&2; exit 2; }
cmake --build build-asan --target test_common test_datasets
# libtorch itself is not instrumented: its own globals are not checked for ODR violations, and leaks are
# left to LeakSanitizer only where it can run (it cannot under ptrace, e.g. in some containers). An
# allocation no machine can give returns null, as glibc's malloc does, so the test of what a lab says when
# the host runs out of memory (a real 1 PiB request) runs under ASan as it runs without it.
export ASAN_OPTIONS=detect_odr_violation=0:abort_on_error=0:halt_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
ctest --test-dir build-asan -L 'common|datasets' --output-on-failure -j2
