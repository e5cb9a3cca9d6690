# The graded build and run of ./lab check and ./lab grade (sourced by ./lab after scripts/driver/common.sh;
# docs/grading.md, "The grading path, for a maintainer"): the tree the student's code is built in, the objects
# built outside the sandbox, each lab's build in a sandbox, the checks that nothing changed after it, and the
# graded tests' run. Needs root, the driver's in_own_group and ensure_built.
# The tree the graded tests are built in: build-student (the labs/ exercise files), or, for ./lab grade
# --submission DIR, build-submission, whose exercise files are DIR's (labs/'s stub where DIR has none).
graded_build=build-student submission=""

# The shared library and the `predictions` program (grade.py compares predictions with it) come first. A
# submission gets a fresh tree every grade: nothing an earlier submission's code wrote into it is read.
prepare_graded_build() {
  if [[ -z "$submission" ]]; then ensure_built student speedlabs_common predictions >/dev/null; return; fi
  bash scripts/driver/setup.sh
  export_torch_prefix
  mkdir -p "$root/.cache"
  rm -rf -- "$graded_build"
  local folder file given copy taken=0
  for folder in $(lab_folders); do
    given="$submission/$(basename "$folder")"
    [[ ! -L "$given" ]] || die "--submission: $given is a symbolic link: give the folder itself"
    [[ ! -e "$given" || -d "$given" ]] || die "--submission: $given is not a folder"
    given+=/predictions.toml
    [[ ! -L "$given" ]] || die "--submission: $given is a symbolic link: give the file itself"
    [[ ! -e "$given" || -f "$given" ]] || die "--submission: $given is not a regular file (a folder, device or FIFO)"
    while IFS= read -r file; do
      given="$submission/$(basename "$folder")/$(basename "$file")"
      # Only a regular file is taken: a symlink (to the reference, say), a device, a FIFO or a folder is refused.
      if [[ -L "$given" ]]; then die "--submission: $given is a symbolic link: give the file itself"
      elif [[ -e "$given" && ! -f "$given" ]]; then die "--submission: $given is not a regular file (a folder, device or FIFO)"
      fi
      if [[ -f "$given" ]]; then taken=$((taken + 1)); else given="$file"; fi
      copy="$graded_build/exercises/${file#labs/}"
      mkdir -p "$(dirname "$copy")"
      cp -- "$given" "$copy"
    done < <(find "$folder" -maxdepth 1 -type f \( -name exercise.cpp -o -name '*.cu' \))
  done
  # Nothing taken is graded (as the stubs, 0 points), but said: a folder one level off is the usual cause.
  if ((taken == 0)); then
    say "warning: --submission $submission holds no exercise file where one is read (NN_topic/exercise.cpp," \
      "NN_topic/*.cu): every lab is graded as its stub$([[ ! -d "$submission/labs" ]] || echo "; it has a labs/ folder: give $submission/labs")"
  fi
  configure "$graded_build" "$root/.cache/configure-submission.log" \
    --preset student -B "$graded_build" -DSPEEDLABS_EXERCISES="$graded_build/exercises"
  cmake --build "$graded_build" --target speedlabs_common predictions >/dev/null
}

# prebuild_ours ID: builds, outside the sandbox and with ccache as usual, every object and library of lab ID's
# graded programs that holds none of the student's code (the tests, the lab's experiment, the earlier labs'
# reference exercises), so that the sandboxed build compiles only the student's files and links.
prebuild_ours() {
  local id="$1" folder=(labs/"$1"_*) program objects=()
  for program in "$folder/test_lab${id}_graded" "$folder/checked_lab$id"; do
    [[ "$program" != */checked_lab* || -f "tests/lab$id/checked.cpp" ]] || continue
    # the program's link inputs (ninja -t query), less the student's: the exercise tree and any CUDA kernel
    while IFS= read -r input; do objects+=("$input"); done < <(ninja -C "$graded_build" -t query "$program" |
      awk '/^  input:/ {take = 1; next} /^  outputs:/ {take = 0} take && $1 ~ /\.(o|a)$/ {print $1}' |
      grep -v -E '(/exercises/|_exercise\.dir/|cuda_kernel)')
  done
  ((${#objects[@]} == 0)) || cmake --build "$graded_build" --target "${objects[@]}" >"$root/.cache/check-prebuild-$id.log" 2>&1 ||
    { tail -n 20 "$root/.cache/check-prebuild-$id.log" >&2; fail "lab $id: building the graded tests' own code failed (above)"; }
}

# build_graded RUN_DIR ID: builds lab ID's graded tests (its log: .cache/check-build-ID.log) and writes how it
# ended to RUN_DIR/builds/ID for grade.py: built; compile_error; or crashed_at_start, when the test program was
# linked in this build (newer than the build's start) but listing its tests, the build's last step, died (a
# static initializer). The compiler's errors are shown here.
build_graded() {
  local run_dir="$1" id="$2" log="$root/.cache/check-build-$2.log" started="$1/builds/$2" folder=(labs/"$2"_*)
  local program="$graded_build/$folder/test_lab${id}_graded"
  : >"$started"
  # In a sandbox (scripts/driver/sandbox.py): listing the tests runs the student's code (static initializers).
  # ccache only reads its cache there (a static initializer could otherwise plant an object that a later build
  # of the reference takes), with its temporary files in the graded tree (its default may be /run/user/UID).
  mkdir -p "$graded_build/.ccache-tmp"
  export CCACHE_TEMPDIR="$root/$graded_build/.ccache-tmp"
  # ccache's preprocessor mode: its direct mode would hand back an object compiled where an
  # __has_include("solutions/...") found the file, which the hidden folder below must make fail.
  export CCACHE_NODIRECT=1
  local targets=("test_lab${id}_graded") hide=() tree
  [[ ! -f "tests/lab$id/checked.cpp" ]] || targets+=("checked_lab$id")
  prebuild_ours "$id"
  # Hidden: every other build tree (the reference's objects and programs: an oracle), the Python references,
  # and this lab's reference exercise where the tree built it for a later lab's graded tests.
  for tree in "$root"/build*/ "$root/reference" "$graded_build"/labs/*/CMakeFiles/lab"${id}"_exercise_reference.dir; do
    [[ -e "$tree" && "$(realpath -- "$tree")" != "$(realpath -- "$graded_build")" ]] && hide+=(--hide "$tree")
  done
  if CCACHE_READONLY=1 in_own_group python3 scripts/driver/sandbox.py run --rw "$graded_build" --hide "$run_dir" \
    --hide "$root/solutions/${folder#labs/}" "${hide[@]}" -- cmake --build "$graded_build" --target "${targets[@]}" >"$log" 2>&1; then
    echo built >"$started"
    # The programs as this build left them: a later lab's code runs while its own tests are listed, and must
    # not change them (run_graded compares before any test runs).
    (cd "$graded_build/$folder" && sha256sum -- "${targets[@]}") >"$run_dir/builds/$id.sha256"
  elif [[ -x "$program" && "$program" -nt "$started" ]]; then
    echo crashed_at_start >"$started"
    grep -E "^ +(Result|Path):" "$log" | head -n 2 >&2
    say "lab $id: your code compiles, but its test program crashed before any test started (whole log: .cache/check-build-$id.log)"
  else
    echo compile_error >"$started"
    grep -E "error|Error" "$log" | head -n 20 >&2
    say "lab $id: your code does not compile (errors above; whole log: .cache/check-build-$id.log)"
  fi
}

# run_graded RUN_DIR ID...: builds the student variant of the labs' graded tests (build_graded) and runs those
# that built, each test in a sandbox of its own (scripts/driver/grade_run.py, scripts/driver/sandbox.py).
# RUN_DIR gets the grader's JUnit (junit.xml), each build's outcome (builds/) and each test's record (ends/),
# written outside the sandboxes under a random token made for this run (SPEEDLABS_GRADE_TOKEN, exported for
# grade.py; no test process sees it). The tests' progress goes to stderr.
run_graded() {
  local run_dir="$1" id built=() budgets=""
  shift
  python3 scripts/driver/sandbox.py probe || exit 2
  [[ "${SPEEDLABS_SANDBOX:-}" != off ]] || say "SPEEDLABS_SANDBOX=off: the graded code runs WITHOUT a sandbox (trusted code only)"
  prepare_graded_build
  rm -rf -- "$run_dir"
  mkdir -p "$run_dir/ends" "$run_dir/builds"
  # The tree's shared libraries, built before any graded code ran, must be the same when the tests run.
  find "$graded_build" -type f -name '*.so*' -exec sha256sum -- {} + >"$run_dir/builds/shared.sha256"
  for id in "$@"; do build_graded "$run_dir" "$id"; done
  for id in "$@"; do
    [[ "$(cat "$run_dir/builds/$id")" == built ]] || continue
    if ! sha256sum --check --status "$run_dir/builds/shared.sha256" ||
       ! (cd "$graded_build"/labs/"$id"_*/ && sha256sum --check --status "$run_dir/builds/$id.sha256"); then
      echo changed_after_build >"$run_dir/builds/$id"
      say "lab $id: its programs or the tree's shared libraries changed after they were built: not graded"
      continue
    fi
    built+=("$id")
  done
  SPEEDLABS_GRADE_TOKEN="$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
  export SPEEDLABS_GRADE_TOKEN
  if ((${#built[@]})); then
    for id in "${built[@]}"; do budgets+="${budgets:+, }lab $id $(awk -F'\t' 'NR > 1 && $4 > m {m = $4} END {print m}' "tests/lab$id/points.tsv") s"; done
    say "running the graded tests of lab ${built[*]}, each in a sandbox; a test still running after its exercise's budget is stopped ($budgets at most)"
    in_own_group python3 scripts/driver/grade_run.py "$graded_build" "$run_dir" "${built[@]}" || true
  fi
  [[ -f "$run_dir/junit.xml" ]] || echo '<testsuite/>' >"$run_dir/junit.xml"
}
