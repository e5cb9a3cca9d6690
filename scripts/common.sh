# Shared helpers of the ./lab driver and the setup scripts (sourced, not run).
say() { printf '\033[1m[lab]\033[0m %s\n' "$*" >&2; }
die() { printf '[lab] error: %s\n' "$*" >&2; exit 2; }

# The data directory: SPEEDLABS_DATA_DIR, else the checkout's cache folder.
data_dir() { echo "${SPEEDLABS_DATA_DIR:-$root/data}"; }

# A libtorch the user already has, named by Torch_DIR or CMAKE_PREFIX_PATH (empty when none).
user_libtorch() {
  if [[ -n "${Torch_DIR:-}" && -f "$Torch_DIR/TorchConfig.cmake" ]]; then echo "$Torch_DIR"; return; fi
  local IFS=:
  for p in ${CMAKE_PREFIX_PATH:-}; do
    for c in "$p/Torch/TorchConfig.cmake" "$p/share/cmake/Torch/TorchConfig.cmake" "$p/lib/cmake/Torch/TorchConfig.cmake"; do
      [[ -f "$c" ]] && { dirname "$c"; return; }
    done
  done
}

# Puts libtorch where CMake's find_package(Torch) looks.
export_torch_prefix() {
  [[ -n "$(user_libtorch)" ]] && return
  # Importing torch takes seconds: the answer is kept until the .venv is made again.
  local prefix cache="$root/.cache/torch-prefix"
  if [[ -s "$cache" && "$cache" -nt "$root/.venv/pyvenv.cfg" && -d "$(<"$cache")" ]]; then
    prefix="$(<"$cache")"
  else
    prefix="$("$root/.venv/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null)" ||
      die "no libtorch: run ./lab setup"
    mkdir -p "$root/.cache" && printf '%s\n' "$prefix" >"$cache"
  fi
  export CMAKE_PREFIX_PATH="$prefix${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
}

# ccache settings that let it cache compiles that use the precompiled header, across checkouts.
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
export CCACHE_BASEDIR="${root:-$PWD}"
