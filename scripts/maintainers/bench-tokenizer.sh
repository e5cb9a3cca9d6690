#!/usr/bin/env bash
# Tokenizer benchmark (not a test): the C++ GPT-2 tokenizer against Python's tiktoken in one run: MB/s on
# tiny shakespeare and on a mixed corpus side by side, where encode()'s time goes, the worst case (one piece
# of 64 KiB to 1 MiB), and 10^6 generated strings token for token (scripts/maintainers/bench-tokenizer.py).
# Installs tiktoken into the checkout's .venv when it is missing (pip; tiktoken then reads the GPT-2 files
# from the data directory, never the network).
#   scripts/maintainers/bench-tokenizer.sh [--data-dir DIR] [--repeats N] [--warmup N] [--rounds N]
#       [--strings N] [--seed N] [--svg FILE] [--json FILE] [--skip speed,steps,worst,parity]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bench="${SPEEDLABS_BUILD_DIR:-$root/build}/bin/bench_tokenizer"
python="$root/.venv/bin/python"
tiktoken_version="0.14.0"  # the version datasets/gpt2_unicode_classes.inc was generated from
data_dir="${SPEEDLABS_DATA_DIR:-$root/data}"
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --data-dir) [[ $# -ge 2 ]] || { echo "bench-tokenizer: --data-dir needs a value" >&2; exit 2; }; data_dir="$2"; shift 2 ;;
    --repeats|--warmup|--rounds|--strings|--seed|--svg|--json|--skip|--mixed-mb)
      [[ $# -ge 2 ]] || { echo "bench-tokenizer: $1 needs a value" >&2; exit 2; }; args+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "bench-tokenizer: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [[ ! -x "$bench" ]]; then
  echo "bench-tokenizer: $bench is not built; run: cmake --build --preset default --target bench_tokenizer" >&2
  exit 2
fi
if [[ ! -x "$python" ]]; then
  echo "bench-tokenizer: no Python in $root/.venv; ./lab setup makes it" >&2
  exit 2
fi
if ! "$python" -c 'import tiktoken' 2>/dev/null; then
  echo "bench-tokenizer: installing tiktoken $tiktoken_version into $root/.venv"
  "$python" -m pip install --quiet "tiktoken==$tiktoken_version" ||
    { echo "bench-tokenizer: pip could not install tiktoken (offline?)" >&2; exit 2; }
fi
installed="$("$python" -c 'import tiktoken; print(tiktoken.__version__)')"
[[ "$installed" == "$tiktoken_version" ]] ||
  echo "bench-tokenizer: note: tiktoken $installed, not $tiktoken_version (a newer Unicode may differ: datasets/gpt2_unicode_classes.py --check)"
exec "$python" "$root/scripts/maintainers/bench-tokenizer.py" --bin "$bench" --data-dir "$data_dir" "${args[@]}"
