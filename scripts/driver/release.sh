#!/usr/bin/env bash
# ./lab release DIR: a copy of the suite a class can be handed (a GitHub Classroom template, say).
#   - every file of the commit checked out (HEAD, as git archive gives it), less what holds an answer:
#     solutions/ (the exercises' reference and the reference predictions), reference/ (the Python
#     references the parity tests compare with), tests/grading/cheats/ (the reference with attacks in it)
#     and .ci/ (the project's own CI, which tests the solutions);
#   - the stubs (labs/NN_topic/exercise.cpp) and the blank predictions (labs/NN_topic/predictions.toml) as
#     they are: the release refuses to be made when one of the predictions files holds an answer;
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

# The committed tree (HEAD): what was reviewed, never someone's half-made change in this working tree.
git archive --format=tar HEAD | tar -x -C "$staging"
rm -rf -- "$staging/solutions" "$staging/reference" "$staging/tests/grading/cheats" "$staging/.ci"
count="$(find "$staging" -type f | wc -l)"
mkdir -p "$staging/.github/workflows"
cp scripts/driver/release/check.yml "$staging/.github/workflows/check.yml"
[[ -e "$staging/solutions" ]] && die "solutions/ in the release"

if [[ -d "$dest" ]]; then rmdir -- "$dest"; fi  # empty, checked above
mv -T -- "$staging" "$dest"
trap - EXIT INT TERM
say "release in $dest: $count files, no solutions/, the stubs and blank predictions, .github/workflows/check.yml (./lab check on every push)"
