#!/usr/bin/env bash
# CI's student-build check: links every lab program with the labs/ stubs (bin/labNN_student, built
# from the same objects as the default build plus the stubs, so it costs a few compiles, not a second
# build) and checks that each one stops with the clear "not implemented yet: TODO(labNN)" message and
# exit code 4, the way a student first meets it. Students build the same thing with ./lab build --student.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
source scripts/common.sh
[[ -f build/build.ninja ]] || die "configure first: ./lab build"
cmake -S . -B build -DSPEEDLABS_STUDENT_VARIANTS=ON >/dev/null
cmake --build build
status=0
for folder in $(find labs -mindepth 1 -maxdepth 1 -type d -name '[0-9][0-9]_*' | sort); do
  id="$(basename "$folder" | cut -c1-2)"
  set +e
  output="$("build/bin/lab${id}_student" --quick 2>&1)"
  code=$?
  set -e
  if [[ $code -eq 4 && "$output" == *"not implemented yet: TODO(lab$id)"* ]]; then
    echo "lab$id with the stubs: exit 4, $(grep -o "not implemented yet: TODO(lab$id).*" <<<"$output" | head -n1)"
  else
    echo "lab$id with the stubs: expected exit 4 and 'not implemented yet: TODO(lab$id)', got exit $code:" >&2
    echo "$output" | tail -n 5 >&2
    status=1
  fi
done
exit $status
