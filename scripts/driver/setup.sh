#!/usr/bin/env bash
# Installs what the lab suite needs, once: system packages, libtorch (a .venv with the torch wheel,
# unless CMAKE_PREFIX_PATH or Torch_DIR already names a libtorch) and the datasets.
# Idempotent: a stamp records what was set up; a second run checks the stamp and does nothing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
source scripts/driver/common.sh

torch_version="2.13.0"
stamp="$root/.cache/setup.stamp"
want="$(cat scripts/driver/apt-packages.txt datasets/manifest.tsv 2>/dev/null | sha256sum | cut -c1-16) torch=$torch_version data=$(data_dir)"

if [[ "${1:-}" != "--force" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi

say "setting up (once): system packages, libtorch, datasets"

# 1. System packages: only the missing ones, through apt (sudo when not root).
mapfile -t packages < <(grep -v '^#' scripts/driver/apt-packages.txt | sed '/^$/d')
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  command -v apt-get >/dev/null || die "apt-get not found: install these yourself: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  say "installing system packages: ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
fi

# 2. libtorch: the user's own, or the torch wheel in .venv.
if [[ -z "$(user_libtorch)" ]]; then
  if ! [[ -x .venv/bin/python ]] || ! .venv/bin/python -c "import torch" 2>/dev/null; then
    say "creating .venv with torch==$torch_version (libtorch comes from the wheel)"
    python3 -m venv .venv
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q "torch==$torch_version" numpy
  fi
fi

# 3. Datasets: verified copies in the data directory, downloaded where missing. Labs 01-04 need no
# data, so a failed download only warns; without the stamp, the next call tries again.
if ! bash scripts/driver/fetch-data.sh "$(data_dir)"; then
  say "warning: the datasets are not complete in $(data_dir): labs 01-04 run; labs 05-06 and tokenize stop" \
      "until they are there (or SPEEDLABS_DATA_DIR names a folder that has them)"
  exit 0
fi

mkdir -p "$(dirname "$stamp")"
echo "$want" > "$stamp"
say "setup done"
