#!/usr/bin/env bash
# CI's check of the code's shape (README, "Keeping the shape"): every C++ and CUDA source formatted as
# .clang-format says, no function in labs/, common/, datasets/ or solutions/ longer than 80 lines (lizard, from
# PyPI, in its own venv under .cache/), no source file there longer than 450 lines, no Python or shell script
# under scripts/ or grader/ (nor the ./lab driver) longer than 400 lines, no source there that includes another
# lab's header other than its exercise.h, every lab's own code in its src/ apart from the student's files, and
# every commit subject since 55adff2 at most 72 characters.
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

# The student's files stand apart: the top of labs/NN_topic/ holds what a student opens (the lesson and its sources,
# the exercise, the predictions, the lab's CMakeLists.txt and records), a header the exercise needs (included by
# exercise.h, an exercise.cpp or a GPU exercise's .cu), a GPU exercise's .cu (solutions/ has its answer); the lab's
# own code is in src/.
# An exercise.cpp (stub or answer) includes by quotes only its lab's top-level headers, common/ and datasets/
# headers, and earlier labs' exercise.h: never the lab's src/.
apart=0
for lab in labs/[0-9][0-9]_*/; do
  lab=${lab%/}; folder=${lab#labs/}
  exercises=("$lab/exercise.cpp"); [[ ! -f "solutions/$folder/exercise.cpp" ]] || exercises+=("solutions/$folder/exercise.cpp")
  kernels=(); for cu in "$lab"/*.cu; do [[ ! -f "solutions/$folder/${cu##*/}" ]] || kernels+=("$cu"); done
  facing=$(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"/]+)".*/\1/p' "$lab/exercise.h" "${exercises[@]}" "${kernels[@]}" | sort -u)
  while IFS= read -r -d '' file; do
    name=${file#"$lab"/}
    [[ "$name" == */* ]] && continue
    case "$name" in
      README.md | README.md.in | CMakeLists.txt | exercise.h | exercise.cpp | predictions.toml | fixed-figures.tsv | records.jsonl) continue ;;
      *.cu) [[ -f "solutions/$folder/$name" ]] && continue ;;
      *.h) grep -qxF "$name" <<<"$facing" && continue ;;
    esac
    echo "$file: the lab's own code goes in $lab/src/ (the top holds the student's files; a header there is one the exercise includes)" >&2
    apart=1
  done < <(git ls-files -z "$lab")
  for exercise in "${exercises[@]}"; do
    while IFS= read -r include; do
      [[ "$include" == common/* || "$include" == datasets/* || "$include" =~ ^labs/[0-9][0-9]_[a-z0-9_]+/exercise\.h$ ]] && continue
      [[ "$include" != */* && -f "$lab/$include" ]] && continue
      echo "$exercise: includes \"$include\": an exercise includes its lab's top-level headers, common/, datasets/ and earlier labs' exercise.h, never the lab's src/" >&2
      apart=1
    done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/p' "$exercise")
  done
done
((apart == 0)) || exit 1
echo "student files: the top of each lab folder holds the student's files; the lab's own code is in src/"

# Commit messages: a subject of at most 72 characters, the measurements and reasons in the body. Checked from the
# last commit whose subjects still ran long (55adff2) on; a clone without it checks the newest commit alone.
since=55adff2
if git cat-file -e "$since^{commit}" 2>/dev/null; then range=("$since..HEAD"); else range=(-1 HEAD); fi
long_subjects="$(git log --format='%h %s' "${range[@]}" | awk '{subject = substr($0, index($0, " ") + 1)} length(subject) > 72')"
[[ -z "$long_subjects" ]] || { echo "commit subjects longer than 72 characters (put the detail in the body):" >&2
  echo "$long_subjects" >&2; exit 1; }
echo "commit subjects: none longer than 72 characters"
