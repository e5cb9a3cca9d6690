#!/usr/bin/env bash
# CI's check of ./lab release (called by .ci/run after the grading check):
#   1. a DIR that exists and is not empty is refused (exit 2) and left as it was;
#   2. the release holds no answer: no solutions/, no file equal to one under solutions/, no reference/, no
#      kept runs (docs/results/: its docs check says why the docs are not built), every predictions.toml blank;
#      the students' workflow (.github/workflows/check.yml) is there; a commit whose stub is the reference
#      (re-spaced) is refused, naming both files;
#   3. a release interrupted by SIGINT leaves neither DIR nor its temporary folder;
#   4. the release builds and ./lab check 01 runs in it: every exercise TODO, the predictions blank, exit 1.
#      Only what ./lab check 01 builds (speedlabs_common and lab 01's graded test), with ccache (keyed relative
#      to the release's own folder by cmake/Dependencies.cmake, so the reference build's objects serve it).
set -euo pipefail
check_start=$SECONDS
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
source scripts/driver/common.sh
export_torch_prefix  # the release uses this libtorch (CMAKE_PREFIX_PATH): no .venv of its own

scratch="$(mktemp -d "${TMPDIR:-/tmp}/speedlabs-release-check.XXXXXX")"
trap 'rm -rf -- "$scratch"' EXIT

echo "check-release: a folder that is not empty is refused"
mkdir -p "$scratch/taken" && echo mine >"$scratch/taken/notes.txt"
status=0
./lab release "$scratch/taken" >"$scratch/refused.log" 2>&1 || status=$?
((status == 2)) || { cat "$scratch/refused.log" >&2; die "./lab release into a folder with a file exited $status, not 2"; }
[[ "$(ls -A "$scratch/taken")" == notes.txt && "$(cat "$scratch/taken/notes.txt")" == mine ]] || die "the refused folder was changed"

echo "check-release: SIGINT while the release is made leaves nothing behind"
./lab release "$scratch/interrupted" >/dev/null 2>&1 &
maker=$!
sleep 0.3
kill -INT "$maker" 2>/dev/null || true
wait "$maker" || true
leftover="$(find "$scratch" -maxdepth 1 -name '.lab-release.*')"
[[ -z "$leftover" ]] || die "an interrupted release left $leftover"
[[ ! -e "$scratch/interrupted" || -z "$(ls -A "$scratch/interrupted" 2>/dev/null)" ]] || rm -rf -- "$scratch/interrupted"  # it may have finished first

echo "check-release: the release holds no answer"
release="$scratch/release"
./lab release "$release" >/dev/null
[[ ! -e "$release/solutions" && ! -e "$release/reference" ]] || die "the release holds solutions/ or reference/"
[[ ! -e "$release/docs/results" ]] || die "the release holds the kept runs (docs/results/), the reference's measurements"
docs_said="$(cd "$release" && python3 scripts/driver/lab_pages.py check 2>&1)" && die "the release's docs check passed without kept runs"
[[ "$docs_said" == *"no kept runs"* ]] || die "the release's docs check did not say why the docs are not built: $docs_said"
[[ -f "$release/.github/workflows/check.yml" ]] || die "the release has no .github/workflows/check.yml"
python3 - "$release" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, str(Path(sys.argv[1]) / "scripts" / "driver"))
import hashlib
import predictions
digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
answers = {digest(p): p for p in Path("solutions").rglob("*") if p.is_file()}
copied = [f"{p} is {answers[digest(p)]}" for p in Path(sys.argv[1]).rglob("*") if p.is_file() and digest(p) in answers]
assert not copied, "the release holds an answer: " + ", ".join(copied)
files = sorted(Path(sys.argv[1]).glob("labs/*/predictions.toml"))
assert files, "no predictions.toml in the release"
filled = [f"{p}: {q.name}" for p in files for q in predictions.read(p) if q.answer is not None]
assert not filled, "answers in the release's predictions: " + ", ".join(filled)
print(f"  {len(files)} predictions files, every answer blank")
PY

echo "check-release: a stub that is a reference file, even re-spaced, is refused"
clone="$scratch/clone"
git clone -q "$root" "$clone"
sed 's/^  //' solutions/02_float16_limits/exercise.cpp >"$clone/labs/02_float16_limits/exercise.cpp"
git -C "$clone" -c user.name=check -c user.email=check@localhost commit -qam "a stub that is the answer"
status=0
"$clone/lab" release "$scratch/leaked" >"$scratch/leaked.log" 2>&1 || status=$?
((status != 0)) && grep -q "labs/02_float16_limits/exercise.cpp is solutions/02_float16_limits/exercise.cpp" "$scratch/leaked.log" ||
  { cat "$scratch/leaked.log" >&2; die "a release whose stub is the reference exited $status without naming it"; }
[[ ! -e "$scratch/leaked" ]] || die "the refused release left $scratch/leaked"

echo "check-release: the release builds and ./lab check 01 runs in it"
build_start=$SECONDS
status=0
(cd "$release" && ./lab check 01 >"$scratch/check.log" 2>&1) || status=$?
((status == 1)) || { cat "$scratch/check.log" >&2; die "./lab check 01 in the release exited $status, not 1 (stubs)"; }
todo="$(grep -c '^  TODO ' "$scratch/check.log" || true)"
blank="$(grep -c '^  PREDICT blank ' "$scratch/check.log" || true)"
((todo >= 3 && blank >= 3)) || { cat "$scratch/check.log" >&2; die "./lab check 01 in the release: $todo TODO lines, $blank blank predictions"; }
echo "  ./lab check 01: $todo exercises TODO, $blank predictions blank, exit 1 ($((SECONDS - build_start)) s, building included)"
echo "check-release: $((SECONDS - check_start)) s"
