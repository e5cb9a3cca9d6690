#!/usr/bin/env bash
# ./lab release DIR: a copy of the suite a class can be handed (a GitHub Classroom template, say).
#   - every file of the commit checked out (HEAD, as git archive gives it), less what holds an answer:
#     solutions/ (the exercises' reference and the reference predictions), reference/ (the Python
#     references the parity tests compare with), tests/grading/cheats/ (the reference with attacks in it),
#     docs/results/ (the kept runs: the reference's measurements) and .ci/ (the project's own CI, which tests
#     the solutions);
#   - the stubs (labs/NN_topic/exercise.cpp) and the blank predictions (labs/NN_topic/predictions.toml) as
#     they are: the release refuses to be made when one of the predictions files holds an answer, or when a
#     file it ships has the content of a reference file (a stub that is the answer, even re-spaced);
#   - .github/workflows/check.yml (scripts/driver/release/check.yml): the students' CI, ./lab check on every push.
# DIR must not exist or be empty: a release never writes over anything. It is built in a temporary folder
# beside DIR and renamed into place at the end; a failure or Ctrl-C leaves nothing behind.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
source scripts/driver/common.sh

(($# == 1)) && [[ -n "$1" ]] || { printf '[lab] error: usage: ./lab release DIR\n' >&2; exit 2; }
dest="$(realpath -m -- "$1")"
case "$dest/" in "$root"/*) printf '[lab] error: %s is inside this checkout: give a folder outside it\n' "$dest" >&2; exit 2 ;; esac
if [[ -e "$dest" || -L "$dest" ]]; then
  [[ -d "$dest" && ! -L "$dest" && -z "$(ls -A -- "$dest")" ]] ||
    { printf '[lab] error: %s exists and is not an empty folder: a release never writes over files\n' "$dest" >&2; exit 2; }
fi
parent="$(dirname -- "$dest")"
mkdir -p -- "$parent" 2>/dev/null || { printf '[lab] error: cannot create %s\n' "$parent" >&2; exit 2; }
staging="$(mktemp -d -p "$parent" ".lab-release.XXXXXX" 2>/dev/null)" ||
  { printf '[lab] error: cannot write into %s\n' "$parent" >&2; exit 2; }
trap 'rm -rf -- "$staging"' EXIT
trap 'rm -rf -- "$staging"; exit 130' INT
trap 'rm -rf -- "$staging"; exit 143' TERM

# Every predictions file a student gets must be blank.
python3 - <<'PY' || die "a predictions file in labs/ holds an answer (above): the release would hand it out"
import sys
sys.path.insert(0, "scripts/driver")
import predictions
from pathlib import Path
import subprocess
names = subprocess.run(["git", "ls-tree", "-r", "--name-only", "HEAD", "labs"], capture_output=True, text=True, check=True).stdout.split()
bad = []
for name in [n for n in names if n.endswith("/predictions.toml")]:
    text = subprocess.run(["git", "show", f"HEAD:{name}"], capture_output=True, text=True, check=True).stdout
    path = Path(name)
    bad += [f"{name}: {q.name}" for q in predictions.read_text(text, path) if q.answer is not None]
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY

# No file a student gets may be a reference file: a stub whose content equals (or, but for its spacing, equals)
# a file of solutions/ hands the answer out under the stub's name.
python3 - <<'PY' || die "a file of the release is a reference answer (above): make the stub a stub again"
import re, subprocess, sys
def tree(*paths):
    out = subprocess.run(["git", "ls-tree", "-r", "HEAD", "--", *paths], capture_output=True, text=True, check=True)
    return [(line.split()[2], line.split("\t", 1)[1]) for line in out.stdout.splitlines() if " blob " in line]
def text(blob):
    return subprocess.run(["git", "cat-file", "blob", blob], capture_output=True, check=True).stdout
squeeze = lambda data: re.sub(rb"\s+", b"", data)
reference = {blob: name for blob, name in tree("solutions")}
squeezed = {squeeze(text(blob)): name for blob, name in reference.items()}
shipped = [(b, n) for b, n in tree(".") if not n.startswith(("solutions/", "reference/", "tests/grading/cheats/", ".ci/"))]
bad = [f"{name} is {reference[blob]}" for blob, name in shipped if blob in reference]
bad += [f"{name} is {squeezed[squeeze(text(blob))]} but for its spacing" for blob, name in shipped
        if name.startswith("labs/") and blob not in reference and squeeze(text(blob)) in squeezed]
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY

# The committed tree (HEAD): what was reviewed, never someone's half-made change in this working tree.
git archive --format=tar HEAD | tar -x -C "$staging"
# Left out too: the kept runs (docs/results/), the reference's own measurements, where most machine-independent
# answers to the predictions can be read; without them the HTML docs are not built in a release (lab_pages.py
# check says so), and each lesson is its lab's README.md.
rm -rf -- "$staging/solutions" "$staging/reference" "$staging/tests/grading/cheats" "$staging/.ci" \
  "$staging/docs/results"
count="$(find "$staging" -type f | wc -l)"
mkdir -p "$staging/.github/workflows"
cp scripts/driver/release/check.yml "$staging/.github/workflows/check.yml"
[[ -e "$staging/solutions" ]] && die "solutions/ in the release"

if [[ -d "$dest" ]]; then rmdir -- "$dest"; fi  # empty, checked above
mv -T -- "$staging" "$dest"
trap - EXIT INT TERM
say "release in $dest: $count files, no solutions/ nor kept runs, the stubs and blank predictions, .github/workflows/check.yml (./lab check on every push)"
