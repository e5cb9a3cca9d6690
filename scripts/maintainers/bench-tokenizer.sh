#!/usr/bin/env bash
# Tokenizer benchmark (not a test): MB/s of the C++ GPT-2 tokenizer and, when Python's tiktoken is
# installed in .venv, the same file through tiktoken side by side plus a token-for-token check.
#   scripts/maintainers/bench-tokenizer.sh [--data-dir DIR] [--repeats N] [--warmup N] [--strings N] [--seed N]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bench="${SPEEDLABS_BUILD_DIR:-$root/build}/bin/bench_tokenizer"
python="$root/.venv/bin/python"
data_dir="${SPEEDLABS_DATA_DIR:-$root/data}"
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --data-dir) [[ $# -ge 2 ]] || { echo "bench-tokenizer: --data-dir needs a value" >&2; exit 2; }; data_dir="$2"; shift 2 ;;
    --repeats|--warmup|--strings|--seed)
      [[ $# -ge 2 ]] || { echo "bench-tokenizer: $1 needs a value" >&2; exit 2; }; args+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,4p' "$0"; exit 0 ;;
    *) echo "bench-tokenizer: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [[ ! -x "$bench" ]]; then
  echo "bench-tokenizer: $bench is not built; run: ninja -C build bench_tokenizer" >&2
  exit 2
fi
if [[ -x "$python" ]] && "$python" -c 'import tiktoken' 2>/dev/null; then
  exec "$python" "$root/scripts/maintainers/bench-tokenizer.py" --bin "$bench" --data-dir "$data_dir" "${args[@]}"
fi
echo "tiktoken is not installed in $root/.venv (pip install tiktoken): C++ only, no comparison"
cpp_args=()
for ((i = 0; i < ${#args[@]}; i += 2)); do
  [[ "${args[i]}" == --repeats || "${args[i]}" == --warmup ]] && cpp_args+=("${args[i]}" "${args[i+1]}")
done
exec "$bench" --data-dir "$data_dir" "${cpp_args[@]}"
