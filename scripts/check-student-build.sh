#!/usr/bin/env bash
# Builds the student preset (labs/ stubs) and checks that every lab program stops with the clear
# "not implemented yet: TODO(labNN)" message and exit code 4, the way a student first meets it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
./lab build --student
status=0
for folder in $(find labs -mindepth 1 -maxdepth 1 -type d -name '[0-9][0-9]_*' | sort); do
  id="$(basename "$folder" | cut -c1-2)"
  set +e
  output="$("build-student/bin/lab$id" --quick 2>&1)"
  code=$?
  set -e
  if [[ $code -eq 4 && "$output" == *"not implemented yet: TODO(lab$id)"* ]]; then
    echo "lab$id (student build): exits 4 with: $(grep -o "not implemented yet: TODO(lab$id).*" <<<"$output" | head -n1)"
  else
    echo "lab$id (student build): expected exit 4 and 'not implemented yet: TODO(lab$id)', got exit $code:" >&2
    echo "$output" | tail -n 5 >&2
    status=1
  fi
done
exit $status
