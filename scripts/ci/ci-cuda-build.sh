#!/usr/bin/env bash
# CI: compile against a CUDA-enabled libtorch every source whose code differs there (the GPU code
# paths under SPEEDLABS_TORCH_HAS_CUDA: CUDA graphs, streams, the caching allocator's statistics; the
# .cu kernels), so they cannot rot on machines without a GPU. scripts/ci/cuda-sources.py picks them; every
# other source compiles to the same code against either libtorch and the CPU build compiled it already.
# Compiling all ~100 sources again would take longer than the rest of CI together on 2 cores.
# No test runs here.
#
#   scripts/ci/ci-cuda-build.sh [ninja targets instead of those sources, e.g. all]
#   scripts/ci/ci-cuda-build.sh --prepare     only install the CUDA libtorch (CI does it while it builds)
#
# Environment: SPEEDLABS_CUDA_VENV (default .venv-cuda), SPEEDLABS_CUDA_BUILD (default build-cuda-check),
# SPEEDLABS_CUDA_HOME (default /usr/local/cuda-13.0, the nvcc toolkit), PYTHON (default python3).
# Idempotent: a venv that already holds the right torch is reused, the build tree is reconfigured in place.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$root/scripts/driver/common.sh"   # say, die, configure
venv=${SPEEDLABS_CUDA_VENV:-$root/.venv-cuda}
build=${SPEEDLABS_CUDA_BUILD:-$root/build-cuda-check}
cuda_home=${SPEEDLABS_CUDA_HOME:-/usr/local/cuda-13.0}
torch_version=2.14.1

[[ -x "$cuda_home/bin/nvcc" ]] || { echo "ci-cuda-build: no nvcc in $cuda_home/bin (set SPEEDLABS_CUDA_HOME)" >&2; exit 2; }

# 1. The CUDA libtorch, in its own venv (pip takes the wheel and the nvidia-* wheels from local disk).
has_cuda_torch() {
  "$venv/bin/python" - "$torch_version" 2>/dev/null <<'PY'
import sys, torch
sys.exit(0 if torch.__version__.split("+")[0] == sys.argv[1] and torch.version.cuda else 1)
PY
}
if ! has_cuda_torch; then
  echo "ci-cuda-build: installing torch==$torch_version (CUDA) into $venv"
  "${PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/pip" install --quiet "torch==$torch_version"
  has_cuda_torch || { echo "ci-cuda-build: torch in $venv is not a CUDA $torch_version build" >&2; exit 3; }
fi
[[ "${1:-}" == --prepare ]] && { echo "ci-cuda-build: torch $torch_version (CUDA) ready in $venv"; exit 0; }
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
prefix=$("$venv/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
wheel_cuda="$site/nvidia/cu13"   # cuBLAS, NVRTC, cuFFT, ... headers and libraries from the nvidia-* wheels
[[ -d "$wheel_cuda/lib" ]] || { echo "ci-cuda-build: $wheel_cuda not found: is this a CUDA 13 torch?" >&2; exit 3; }

# 2. One CUDA toolkit folder for find_package(Torch): nvcc and the runtime from $cuda_home, the math
#    libraries torch links (cuBLAS, NVRTC, ...) from the wheels, which ship only versioned .so names.
toolkit="$build/cuda-toolkit"
rm -rf "$toolkit"
mkdir -p "$toolkit/include" "$toolkit/lib" "$toolkit/targets/x86_64-linux"
ln -s "$cuda_home/bin" "$toolkit/bin"
ln -s "$cuda_home/nvvm" "$toolkit/nvvm"
ln -s lib "$toolkit/lib64"
# nvcc finds headers and libraries relative to where it is called from: the same layout as $cuda_home.
ln -s ../../include "$toolkit/targets/x86_64-linux/include"
ln -s ../../lib "$toolkit/targets/x86_64-linux/lib"
for dir in "$cuda_home/include" "$wheel_cuda/include"; do
  for entry in "$dir"/*; do [[ -e "$toolkit/include/${entry##*/}" ]] || ln -s "$entry" "$toolkit/include/"; done
done
for dir in "$cuda_home/lib64" "$wheel_cuda/lib"; do
  for entry in "$dir"/*; do
    name=${entry##*/}
    [[ -e "$toolkit/lib/$name" ]] || ln -s "$entry" "$toolkit/lib/$name"
    unversioned=${name%%.so.*}.so   # libcublas.so.13 -> libcublas.so, what find_library looks for
    if [[ "$name" == *.so.* && ! -e "$toolkit/lib/$unversioned" ]]; then ln -s "$entry" "$toolkit/lib/$unversioned"; fi
  done
done

# 3. Configure (with the stub-linked variants, so the labs/ stubs compile here too) and build. The
#    build type CompileCheck has no flags of its own (no optimisation, no debug info): this build only
#    has to compile, and -O0 does that fastest.
configure_log="$build/ci-cuda-configure.log"
cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=CompileCheck \
  -DSPEEDLABS_STUDENT_VARIANTS=ON -DCMAKE_UNITY_BUILD=OFF \
  -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CUDA_COMPILER="$toolkit/bin/nvcc" \
  -DCUDAToolkit_ROOT="$toolkit" \
  -DCUDA_TOOLKIT_ROOT_DIR="$toolkit" \
  -DTORCH_CUDA_ARCH_LIST="8.0;9.0" | tee "$configure_log"
# find_package(Torch) can quietly fall back to no CUDA; then this build would prove nothing.
grep -q "libtorch CUDA ON" "$configure_log" || { echo "ci-cuda-build: libtorch was configured without CUDA" >&2; exit 3; }
if (($#)); then
  targets=("$@")
else
  mapfile -t sources < <(python3 "$root/scripts/ci/cuda-sources.py" "$build")
  ((${#sources[@]})) || { echo "ci-cuda-build: cuda-sources.py found nothing to compile" >&2; exit 3; }
  printf 'ci-cuda-build: compiling %s\n' "${sources[@]}"
  targets=()
  for source in "${sources[@]}"; do targets+=("$root/$source^"); done   # ninja: "file^" builds its object
fi
cmake --build "$build" -- "${targets[@]}"
echo "ci-cuda-build: ${#targets[@]} targets compiled against libtorch $torch_version (CUDA) in $build"
