#!/usr/bin/env bash
# Lab 06's speed ladder on a CUDA GPU, with the Python peers, in one run; then the docs page.
#
#   scripts/maintainers/gpu-bench.sh [--out DIR] [--publish] [--gpu-tests] [-- extra lab06 flags, e.g. --shapes 4x128]
#   scripts/maintainers/gpu-bench.sh --publish-only DIR
#
# Run:     configures build-gpu/ against the CUDA libtorch of $SPEEDLABS_GPU_PYTHON (default
#          /opt/torch/.venv/bin/python, else .venv-cuda/bin/python), builds lab06, runs
#          `lab06 --device cuda` with the peers, and writes into DIR (default build-gpu/bench/):
#          lab06.json (observations), ladder.json / ladder.md / ladder.dat (the results), lab06.txt
#          (the printed log) and machine.md (GPU, driver, CUDA, compiler, torch).
#          --gpu-tests first builds the GPU tests too and runs `ctest -L gpu` (gpu-tests.txt): labs 04
#          and 06 on the device, the CUDA graph of the fused step included (about a minute more).
# Publish: fills docs/gpu-ladder.md from DIR and draws docs/images/gpu-ladder.svg with gnuplot
#          (--publish after the run, or --publish-only DIR on another machine, e.g. after the files
#          came back from the lent GPU machine).
# Offline machines: run scripts/maintainers/pack-carry.sh first where the packages are installed; the headers,
# libraries, pkg-config and data in .carry/ are used when the machine lacks them.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out="$root/build-gpu/bench"
publish=0
publish_only=""
gpu_tests=0
lab_args=()
while (($#)); do
  case "$1" in
    --out) out=$(realpath -m "$2"); shift 2 ;;
    --publish) publish=1; shift ;;
    --gpu-tests) gpu_tests=1; shift ;;
    --publish-only) publish_only=$(realpath -m "$2"); shift 2 ;;
    --) shift; lab_args=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p'; exit 0 ;;
    *) echo "gpu-bench: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

publish_page() {  # $1: a folder written by a run
  local dir=$1
  for f in ladder.md ladder.dat lab06.json machine.md; do
    [[ -f "$dir/$f" ]] || { echo "gpu-bench: $dir/$f missing: is $dir the output of a GPU run?" >&2; exit 2; }
  done
  mkdir -p "$root/docs/images"
  local chart_line="(no chart: gnuplot was not found where the page was made)"
  if command -v gnuplot >/dev/null; then
    local blocks
    blocks=$(grep -c '^# ' "$dir/ladder.dat")
    {
      echo "set terminal svg size 960,$((360 * blocks)) dynamic font 'sans,11'"
      echo "set output '$root/docs/images/gpu-ladder.svg'"
      echo "set termoption noenhanced"  # names like python_eager_bf16 are not subscripts
      echo "set multiplot layout $blocks,1"
      echo "set style fill solid 0.8; set boxwidth 0.7; set grid ytics; set ylabel 'tokens/s'; set xtics rotate by -30"
      local i=0
      while read -r shape; do
        echo "set title 'lab 06: tokens/s, B x T = $shape'"
        echo "plot '$dir/ladder.dat' index $i using 0:2:xtic(1) with boxes notitle"
        i=$((i + 1))
      done < <(sed -n 's/^# //p' "$dir/ladder.dat")
      echo "unset multiplot"
    } | gnuplot
    chart_line="![tokens/s per rung and Python peer](images/gpu-ladder.svg)"
  fi
  python3 - "$dir" "$root/docs/gpu-ladder.md" "$chart_line" <<'PY'
import json, sys, pathlib
dir, page, chart = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
report = json.loads((dir / "lab06.json").read_text())
goals = [o for o in report["observations"] if o["id"].startswith("goal_")]
rows = "\n".join(f"| `{o['id']}` | {o['claim']} | {o['expected']} | {json.dumps(o.get('measured'))} | "
                 f"**{o['verdict']}** {o.get('reason', '')} |" for o in goals)
page.write_text(f"""# GPT-2 speed ladder on a GPU {{#gpu_ladder}}

The latest run of `scripts/maintainers/gpu-bench.sh` (lab 06, `labs/06_compile_ahead/`): every rung of the C++
ladder and the Python peers (the reference model of `reference/gpt_reference.py`, eager and
`torch.compile`) in one run on one GPU, on the same initial weights and batches. Numbers are this
run's measurements; MFU is against the bf16 matmul rate measured in the same run.

## Machine

{(dir / "machine.md").read_text().strip()}

## The ladder

{(dir / "ladder.md").read_text().strip()}

{chart}

## The GPU goals

| id | claim | goal | measured | verdict |
|---|---|---|---|---|
{rows}
""")
PY
  echo "gpu-bench: wrote $root/docs/gpu-ladder.md"
}

if [[ -n "$publish_only" ]]; then
  publish_page "$publish_only"
  exit 0
fi

# 1. A Python whose torch has CUDA: its libtorch is what the lab links.
python=${SPEEDLABS_GPU_PYTHON:-}
for candidate in /opt/torch/.venv/bin/python "$root/.venv-cuda/bin/python"; do
  [[ -z "$python" && -x "$candidate" ]] && python=$candidate
done
[[ -n "$python" ]] || { echo "gpu-bench: no Python with a CUDA torch (set SPEEDLABS_GPU_PYTHON)" >&2; exit 2; }
"$python" -c 'import sys, torch; sys.exit(0 if torch.version.cuda and torch.cuda.is_available() else 1)' ||
  { echo "gpu-bench: $python has no CUDA torch or sees no GPU" >&2; exit 3; }
torch_prefix=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
nvcc=$(command -v nvcc || true)
[[ -z "$nvcc" && -x "${SPEEDLABS_CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]] && nvcc=${SPEEDLABS_CUDA_HOME:-/usr/local/cuda}/bin/nvcc
[[ -n "$nvcc" ]] || { echo "gpu-bench: nvcc not found (put it on PATH or set SPEEDLABS_CUDA_HOME)" >&2; exit 2; }
cuda_home=$(dirname "$(dirname "$(readlink -f "$nvcc")")")

# 2. What the machine lacks comes from .carry/ (scripts/maintainers/pack-carry.sh).
prefix_path="$torch_prefix"
cmake_extra=()
if [[ -d "$root/.carry/prefix" ]]; then
  carried_lib=$(dirname "$(ls "$root"/.carry/prefix/lib/*/libcrypto.so)")  # lib/<architecture of the packer>
  prefix_path="$prefix_path;$root/.carry/prefix"
  export PKG_CONFIG_PATH="$carried_lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  cmake_extra+=("-DOPENSSL_INCLUDE_DIR=$root/.carry/prefix/include" "-DOPENSSL_CRYPTO_LIBRARY=$carried_lib/libcrypto.so")
  if ! command -v pkg-config >/dev/null; then
    export LD_LIBRARY_PATH="$root/.carry/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    cmake_extra+=("-DPKG_CONFIG_EXECUTABLE=$root/.carry/bin/pkg-config")
  fi
fi
if [[ -z "${SPEEDLABS_DATA_DIR:-}" && -d "$root/.carry/data" ]]; then export SPEEDLABS_DATA_DIR="$root/.carry/data"; fi

# 3. Configure and build the lab (no tests: they are built and run by the CPU CI).
build="$root/build-gpu"
mkdir -p "$build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPEEDLABS_TESTS="$( ((gpu_tests)) && echo ON || echo OFF)" \
  -DCMAKE_PREFIX_PATH="$prefix_path" -DCMAKE_CUDA_COMPILER="$nvcc" -DCUDAToolkit_ROOT="$cuda_home" \
  -DSPEEDLABS_PYTHON="$python" "${cmake_extra[@]}" | tee "$build/gpu-bench-configure.log"
grep -q "libtorch CUDA ON" "$build/gpu-bench-configure.log" || { echo "gpu-bench: libtorch was configured without CUDA" >&2; exit 3; }
targets=(lab06)
((gpu_tests)) && targets+=(test_lab04_gpu test_lab06_gpu)
cmake --build "$build" --target "${targets[@]}"

# 4. The run, and what it ran on.
mkdir -p "$out"
{
  echo "| what | version |"
  echo "|---|---|"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader |
    sed 's/^\(.*\), \(.*\), \(.*\)$/| GPU | \1 (\3) |\n| driver | \2 |/'
  echo "| CUDA (nvcc) | $("$nvcc" --version | sed -n 's/.*release \([^,]*\).*/\1/p') |"
  "$python" -c 'import torch; print(f"| torch / libtorch | {torch.__version__} (CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}) |")'
  echo "| compiler | $(c++ --version | head -1) |"
  echo "| CPU | $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1) |"
  echo "| date | $(date -u +%Y-%m-%dT%H:%MZ) |"
} > "$out/machine.md"
status=0
if ((gpu_tests)); then
  (cd "$build" && ctest -L gpu --output-on-failure --timeout 300) 2>&1 | tee "$out/gpu-tests.txt" || status=$?
fi
"$build/bin/lab06" --device cuda --python "$python" --results "$out" --json "$out/lab06.json" "${lab_args[@]}" \
  2>&1 | tee "$out/lab06.txt" || status=$?
echo "gpu-bench: results in $out (exit status $status: the GPU tests' where they failed, else lab06's)"
if ((publish)); then publish_page "$out"; fi
exit "$status"
