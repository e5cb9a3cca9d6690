#!/usr/bin/env bash
# tests/grading/driver_build_failures.sh ROOT: ./lab on a scratch checkout whose cmake fails (a stand-in on PATH).
# A failed configure exits 3 and removes the half-made build folder's CMakeCache.txt (else the cached
# Torch_DIR-NOTFOUND outlives its cause); a failed build of `./lab run 05 --mine` exits 3, not the verdict's 1;
# a failed build that ./lab check keeps in a log (the reference's predictions program) shows the compiler's error
# and exits 3.
set -euo pipefail
source_root="$1"
scratch="$(mktemp -d)"
trap 'rm -rf -- "$scratch"' EXIT
mkdir -p "$scratch/scripts/driver" "$scratch/grader" "$scratch/labs/05_gpt2" "$scratch/bin" "$scratch/torch" \
  "$scratch/tests/lab05"
cp "$source_root/lab" "$scratch/"
cp "$source_root/grader/build.sh" "$scratch/grader/"
cp "$source_root/scripts/driver/common.sh" "$source_root/scripts/driver/build_estimate.py" \
  "$scratch/scripts/driver/"
printf 'exit 0\n' >"$scratch/scripts/driver/setup.sh"  # nothing to install here
printf 'pass\n' >"$scratch/grader/sandbox.py"  # a sandbox that can be made (its probe passes)
printf '# 05: a lab\n' >"$scratch/labs/05_gpt2/README.md"
printf 'train_step\t20\n' >"$scratch/tests/lab05/points.tsv"  # lab 05 is graded: ./lab check builds for it
touch "$scratch/torch/TorchConfig.cmake"      # a libtorch the driver takes as the user's own
cat >"$scratch/bin/cmake" <<'CMAKE'
#!/usr/bin/env bash
# A cmake whose configure leaves a cache behind and fails, and whose build fails.
case "$1" in
  --preset) mkdir -p build-student && echo 'Torch_DIR:PATH=Torch_DIR-NOTFOUND' >build-student/CMakeCache.txt
            echo 'Could not find a package configuration file provided by "Torch"'; exit 1 ;;
  --build) echo 'exercise.cpp:1:1: error: expected unqualified-id'; exit 1 ;;
esac
CMAKE
chmod +x "$scratch/bin/cmake"
export PATH="$scratch/bin:$PATH" Torch_DIR="$scratch/torch"
expect="$source_root/tests/expect_exit.sh"

bash "$expect" 3 "removed build-student/CMakeCache.txt" "$scratch/lab" run 05 --mine
[[ ! -e "$scratch/build-student/CMakeCache.txt" ]] || { echo "the failed configure's cache is still there" >&2; exit 1; }

touch "$scratch/build-student/build.ninja"  # configured: now the build itself fails
bash "$expect" 3 "the build failed" "$scratch/lab" run 05 --mine
mkdir -p "$scratch/build" && touch "$scratch/build/build.ninja"  # the reference build, configured: its quiet build fails too
bash "$expect" 3 "expected unqualified-id" "$scratch/lab" check 05
