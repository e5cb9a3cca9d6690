#!/usr/bin/env bash
# tests/expect_exit.sh CODE PATTERN PROGRAM [ARGS...]: runs the program and passes when it exits with
# exactly CODE and its output (stdout and stderr) contains PATTERN (a grep -E pattern). CTest alone can
# only tell zero from non-zero; the labs promise a specific code for each kind of failure.
set -u
expected_code=$1 pattern=$2
shift 2
output=$("$@" 2>&1)
code=$?
if [[ $code -ne $expected_code ]]; then
  printf 'expected exit %s, got %s from: %s\n%s\n' "$expected_code" "$code" "$*" "$output" >&2
  exit 1
fi
if ! grep -qE -- "$pattern" <<<"$output"; then
  printf 'exit %s as expected, but the output lacks /%s/:\n%s\n' "$code" "$pattern" "$output" >&2
  exit 1
fi
echo "exit $code with /$pattern/: ok"
