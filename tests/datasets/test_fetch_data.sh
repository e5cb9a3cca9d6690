#!/usr/bin/env bash
# scripts/driver/fetch-data.sh: keeps correct files, downloads missing ones, refuses a wrong sum without
# leaving anything behind, and reports an unreachable source. Downloads come from file:// URLs.
# Usage: test_fetch_data.sh REPO_ROOT   (the data comes from $SPEEDLABS_DATA_DIR, else REPO_ROOT/data)
set -uo pipefail
root="$1"; data="${SPEEDLABS_DATA_DIR:-$root/data}"
fetch="$root/scripts/driver/fetch-data.sh"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. The real manifest against a directory that already has every file: nothing downloaded.
cp -r "$data/." "$work/complete"
out="$("$fetch" "$work/complete" 2>&1)" || fail "a complete directory was refused: $out"
grep -q downloading <<<"$out" && fail "a complete directory caused a download: $out"

# 2. A local manifest: one good file, one whose sum is wrong.
good_sum="$(sha256sum "$data/gpt2/vocab.bpe" | cut -d' ' -f1)"
printf 'a/vocab.bpe\tfile://%s\t%s\n' "$data/gpt2/vocab.bpe" "$good_sum" > "$work/good.tsv"
out="$(SPEEDLABS_MANIFEST="$work/good.tsv" "$fetch" "$work/dest" 2>&1)" || fail "good download failed: $out"
cmp -s "$work/dest/a/vocab.bpe" "$data/gpt2/vocab.bpe" || fail "downloaded file differs"

printf 'b/input.txt\tfile://%s\t%s\n' "$data/tinyshakespeare/input.txt" "$good_sum" > "$work/bad.tsv"
out="$(SPEEDLABS_MANIFEST="$work/bad.tsv" "$fetch" "$work/dest" 2>&1)"; code=$?
[[ $code -eq 1 ]] || fail "wrong sum: exit $code, expected 1: $out"
grep -q "b/input.txt" <<<"$out" || fail "wrong sum: the file is not named: $out"
[[ -z "$(ls -A "$work/dest/b")" ]] || fail "wrong sum left files behind: $(ls -A "$work/dest/b")"

# 3. An unreachable source: a clear message, exit 1, nothing left.
printf 'c/x.txt\tfile://%s/none\t%s\n' "$work" "$good_sum" > "$work/offline.tsv"
out="$(SPEEDLABS_MANIFEST="$work/offline.tsv" "$fetch" "$work/dest" 2>&1)"; code=$?
[[ $code -eq 1 ]] || fail "unreachable: exit $code, expected 1: $out"
grep -q "could not download c/x.txt" <<<"$out" || fail "unreachable: unclear message: $out"
[[ -z "$(ls -A "$work/dest/c")" ]] || fail "unreachable source left files behind"

# 4. Bad usage.
"$fetch" >/dev/null 2>&1; [[ $? -eq 2 ]] || fail "no DIR: expected exit 2"
echo "fetch-data.sh: all checks passed"
