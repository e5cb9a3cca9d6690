# Shared helpers of the ./lab driver and the setup scripts (sourced, not run).
say() { printf '\033[1m[lab]\033[0m %s\n' "$*" >&2; }
die() { printf '[lab] error: %s\n' "$*" >&2; exit 2; }
# A run that could not be made (a failed configure or build): the labs' exit code 3.
fail() { printf '[lab] error: %s\n' "$*" >&2; exit 3; }

# The lab folders (labs/NN_topic), in lab order: the one list the driver and every script read (Python's
# through scripts/driver/lab_list.py).
lab_folders() { find labs -mindepth 1 -maxdepth 1 -type d -name '[0-9][0-9]_*' | sort; }

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

# configure DIR LOG CMAKE_ARGS...: configures the build folder DIR, its output in LOG. On failure the log is shown
# and DIR's CMakeCache.txt removed: CMake caches what it could not find (Torch_DIR-NOTFOUND) and would reuse it
# on the next try even after the cause is fixed.
configure() {
  local dir="$1" log="$2"
  shift 2
  cmake "$@" >"$log" 2>&1 && return
  cat "$log" >&2
  rm -f -- "$dir/CMakeCache.txt"
  fail "cmake configure failed (log above); removed $dir/CMakeCache.txt so that the next try starts afresh"
}

# preset -> build folder (kept in step with CMakePresets.json)
build_dir_of() { case "$1" in default) echo build ;; student) echo build-student ;; *) echo "build-$1" ;; esac; }

# ensure_built [--log FILE] PRESET [TARGET...]: set up, configure once, build the targets (all when none are
# named). With --log, the build's output goes to FILE and its last lines are shown only when it fails.
ensure_built() {
  local log="" preset dir
  [[ "${1:-}" != --log ]] || { log="$2"; shift 2; }
  preset="${1:-default}"
  shift || true
  dir="$(build_dir_of "$preset")"
  if [[ -z "$log" ]]; then bash scripts/driver/setup.sh; else mkdir -p "$(dirname -- "$log")" && bash scripts/driver/setup.sh >"$log"; fi
  export_torch_prefix
  mkdir -p "$root/.cache"  # the logs' folder (a fresh clone with its own libtorch has none yet)
  if [[ ! -f "$dir/build.ninja" ]]; then
    say "configuring ($preset preset)"
    configure "$dir" "$root/.cache/configure-$preset.log" --preset "$preset"
  fi
  # One line first: what will be built and about how long it takes here (from the last build's times).
  # The line is advice: a missing or failing estimate never stops the build.
  local plan=""
  plan="$(python3 scripts/driver/build_estimate.py "$dir" "$@" 2>/dev/null)" || plan=""
  [[ -z "$plan" ]] || say "$plan"
  local build=(cmake --build --preset "$preset")
  (($# == 0)) || build+=(--target "$@")
  if [[ -z "$log" ]]; then
    "${build[@]}" || fail "the build failed (errors above)"
  else
    "${build[@]}" >>"$log" 2>&1 || { tail -n 40 -- "$log" >&2; fail "the build failed (its last lines above; all of it in $log)"; }
  fi
}
