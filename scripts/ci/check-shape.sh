#!/usr/bin/env bash
# CI's check of the code's shape (README, "Keeping the shape"): every C++ and CUDA source formatted as
# .clang-format says, no function in labs/, common/, datasets/ or solutions/ longer than 80 lines (lizard, from
# PyPI, in its own venv under .cache/), no source file there longer than 450 lines, no Python or shell script
# under scripts/ or grader/ (nor the ./lab driver) longer than 400 lines, no source there that includes another
# lab's header other than its exercise.h, and every commit subject since 55adff2 at most 72 characters.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

git ls-files -z '*.cpp' '*.h' '*.cu' | xargs -0 clang-format --dry-run -Werror
echo "clang-format: every source as .clang-format says"

venv="$root/.cache/lizard-venv"
if ! [[ -x "$venv/bin/lizard" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q lizard
fi
# -L 80: a function longer than 80 lines is a warning; -C 1000: complexity is not judged here; -w: warnings only,
# and a non-zero exit when there is one.
"$venv/bin/lizard" -L 80 -C 1000 -w labs common datasets solutions
echo "lizard: no function longer than 80 lines"

long=0
while IFS= read -r -d '' file; do
  lines=$(wc -l <"$file")
  if ((lines > 450)); then
    echo "$file: $lines lines (at most 450: split it along a real seam)" >&2
    long=1
  fi
done < <(git ls-files -z labs common datasets solutions | grep -z -E '\.(cpp|h|cu)$')
((long == 0)) || exit 1
echo "file length: no source file longer than 450 lines"

# The scripts are held to a size too: 400 lines, past which a script is doing two jobs.
long=0
while IFS= read -r -d '' file; do
  lines=$(wc -l <"$file")
  if ((lines > 400)); then
    echo "$file: $lines lines (a script holds at most 400: split it into modules along a real seam)" >&2
    long=1
  fi
done < <(git ls-files -z scripts grader lab | grep -z -E '\.(py|sh)$|^lab$')
((long == 0)) || exit 1
echo "script length: no Python or shell script under scripts/ or grader/, nor ./lab, longer than 400 lines"

# A lab includes from another lab only its exercise.h (what a later lab runs of a student's code); anything else two
# labs share lives in common/ (README.md, "Layout"). From outside lab NN's folders labs/NN_x/ and solutions/NN_x/, an include
# of labs/NN_x/... or solutions/NN_x/... may name only labs/NN_x/exercise.h. (A bare include of another lab's file
# is caught by the build: a lab's include path is its own folder.)
foreign=0
while IFS= read -r hit; do
  file=${hit%%:*}
  include=$(sed -E 's/^[^:]*:[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$hit")
  own=$(sed -nE 's#^(labs|solutions)/([^/]+)/.*#\2#p' <<<"$file")
  folder=$(sed -E 's#^(labs|solutions)/([^/]+)/.*#\2#' <<<"$include")
  if [[ "$folder" != "$own" && "$include" != "labs/$folder/exercise.h" ]]; then
    echo "$(cut -d: -f1,2 <<<"$hit"): includes $include, lab $folder's own header: include only its exercise.h, or move what is shared to common/" >&2
    foreign=1
  fi
done < <(git ls-files -z labs common datasets solutions | grep -z -E '\.(cpp|h|cu|cuh)$' |
  xargs -0 grep -HnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"(labs|solutions)/' || true)
((foreign == 0)) || exit 1
echo "lab includes: from another lab, only its exercise.h (labs/, solutions/, common/, datasets/)"

# Commit messages: a subject of at most 72 characters, the measurements and reasons in the body. Checked from the
# last commit whose subjects still ran long (55adff2) on; a clone without it checks the newest commit alone.
since=55adff2
if git cat-file -e "$since^{commit}" 2>/dev/null; then range=("$since..HEAD"); else range=(-1 HEAD); fi
long_subjects="$(git log --format='%h %s' "${range[@]}" | awk '{subject = substr($0, index($0, " ") + 1)} length(subject) > 72')"
[[ -z "$long_subjects" ]] || { echo "commit subjects longer than 72 characters (put the detail in the body):" >&2
  echo "$long_subjects" >&2; exit 1; }
echo "commit subjects: none longer than 72 characters"
