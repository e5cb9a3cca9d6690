# The graded build and run of ./lab check and ./lab grade (sourced by ./lab after scripts/driver/common.sh;
# docs/grading.md, "The grading path, for a maintainer"): the tree the student's code is built in, the objects
# built outside the sandbox, each lab's build in a sandbox in a copy of the tree of its own, and the graded tests'
# run. Needs the driver's in_own_group and scripts/driver/common.sh's ensure_built.
# The tree the graded tests are built in: build-student (the labs/ exercise files), or, for ./lab grade
# --submission DIR, build-submission, whose exercise files are DIR's (labs/'s stub where DIR has none).
graded_build=build-student submission="" copies=""

# The shared library comes first, and the reference build's `predictions` program (grade.py's). A
# submission gets a fresh tree every grade: nothing an earlier submission's code wrote into it is read.
prepare_graded_build() {
  # grade.py's, from the reference build: no graded code runs there
  ensure_built --log "$root/.cache/build-predictions.log" default predictions
  if [[ -z "$submission" ]]; then ensure_built --log "$root/.cache/build-common.log" student speedlabs_common; return; fi
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
  cmake --build "$graded_build" --target speedlabs_common >"$root/.cache/build-common.log" 2>&1 ||
    { tail -n 40 "$root/.cache/build-common.log" >&2; fail "building the shared library failed (above; all of it in .cache/build-common.log)"; }
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
      awk '/^  input:/ {take = 1; next} /^  outputs:/ {take = 0}
           take {f = ($1 == "|" || $1 == "||") ? $2 : $1; if (f ~ /\.(o|a)$/ && f !~ /^\//) print f}' |
      grep -v -E '(/exercises/|_exercise\.dir/|_exercise\.a$|cuda_kernel)')
  done
  ((${#objects[@]} == 0)) || cmake --build "$graded_build" --target "${objects[@]}" >"$root/.cache/check-prebuild-$id.log" 2>&1 ||
    { tail -n 20 "$root/.cache/check-prebuild-$id.log" >&2; fail "lab $id: building the graded tests' own code failed (above)"; }
}

# lab_copy ID: lab ID's own copy of the graded tree (hard links to the tree's files, which the sandbox's user
# cannot write; its folders, the lab's own folder and ninja's logs its own), made afresh: the tree lab ID's code
# is built and tested in, so that no lab's code can touch another lab's programs or the shared tree.
lab_copy() {
  local copy="$copies/lab$1" folder=(labs/"$1"_*) log
  rm -rf -- "$copy"
  mkdir -p "$copies"
  if [[ $(id -u) -eq 0 ]]; then
    cp -al -- "$graded_build" "$copy"
    rm -rf -- "$copy/$folder" "$copy/.ninja_log" "$copy/.ninja_deps"
    cp -a -- "$graded_build/$folder" "$copy/$folder"
    for log in .ninja_log .ninja_deps; do [[ ! -f "$graded_build/$log" ]] || cp -- "$graded_build/$log" "$copy/$log"; done
    find "$copy" -type d -exec chown 65534:65534 {} + && chown -R 65534:65534 "$copy/$folder"
    chown 65534:65534 "$copy"/.ninja_* 2>/dev/null || true
  else
    cp -a -- "$graded_build" "$copy"  # a user grading as themselves owns the links' files: a whole copy
  fi
  python3 grader/sandbox.py phony-references "$copy/build.ninja"  # no solutions/ in the sandbox: none needed
}

# build_graded RUN_DIR ID: builds lab ID's graded tests in its own copy of the tree (lab_copy; the log:
# .cache/check-build-ID.log) and writes how it ended to RUN_DIR/builds/ID for grade.py: built; compile_error;
# build_timeout (past SPEEDLABS_SANDBOX_BUILD_S, 600 s); build_wrote_too_much (past SPEEDLABS_SANDBOX_WRITE_MB,
# grader/sandbox.py); or crashed_at_start, when the test program was linked in
# this build (newer than the build's start) but listing its tests, the build's last step, died (a static
# initializer). The compiler's errors are shown here.
build_graded() {
  local run_dir="$1" id="$2" log="$root/.cache/check-build-$2.log" started="$1/builds/$2" folder=(labs/"$2"_*)
  local program="$copies/lab$id/$folder/test_lab${id}_graded" code=0 budget="${SPEEDLABS_SANDBOX_BUILD_S:-600}"
  : >"$started"
  # ccache's preprocessor mode for the objects built outside: its direct mode would hand back an object compiled
  # where an __has_include("solutions/...") found the file. The sandbox's build runs without ccache.
  export CCACHE_NODIRECT=1
  local targets=("test_lab${id}_graded") hide=()
  [[ ! -f "tests/lab$id/checked.cpp" ]] || targets+=("checked_lab$id")
  prebuild_ours "$id"
  ninja -C "$graded_build" build.ninja >/dev/null  # CMake, where it must run again, runs here, never in the sandbox
  lab_copy "$id"
  # Hidden inside the allowlisted tree: this lab's reference exercise, where the tree built it for a later lab.
  for tree in "$graded_build"/labs/*/CMakeFiles/lab"${id}"_exercise_reference.dir; do
    [[ ! -e "$tree" ]] || hide+=(--hide "$root/$tree")
  done
  # In a sandbox (grader/sandbox.py), in the lab's own copy: listing the tests runs the student's code.
  SPEEDLABS_SANDBOX_LAB="$id" in_own_group timeout --kill-after=10 "$budget" python3 grader/sandbox.py run \
    --rw "$graded_build" --hide "$run_dir" "${hide[@]}" -- cmake --build "$graded_build" --target "${targets[@]}" \
    >"$log" 2>&1 || code=$?
  # What the build left is the student's: a program that is a link (to the reference build's, say) or not a
  # plain file is not run, since the grader would follow it out of the lab's copy.
  local target replaced=0
  for target in "${targets[@]}"; do
    [[ -f "$copies/lab$id/$folder/$target" && ! -L "$copies/lab$id/$folder/$target" ]] || replaced=1
  done
  if ((code == 0 && replaced)); then
    echo program_replaced >"$started"
    say "lab $id: its built program was replaced by a link or something other than a file while it built: not graded"
  elif ((code == 0)); then
    echo built >"$started"
  elif ((code == 120)); then  # grader/sandbox.py's WROTE_TOO_MUCH
    echo build_wrote_too_much >"$started"
    say "lab $id: the build of your code wrote past its limit of ${SPEEDLABS_SANDBOX_WRITE_MB:-4096} MiB: stopped, not graded (whole log: .cache/check-build-$id.log)"
  elif ((code == 124 || code == 137)); then
    echo build_timeout >"$started"
    say "lab $id: the build of your code ran past its limit of $budget s: stopped, not graded (whole log: .cache/check-build-$id.log)"
  elif [[ -x "$program" && "$program" -nt "$started" ]]; then
    echo crashed_at_start >"$started"
    grep -E "^ +(Result|Path):" "$log" | head -n 2 >&2 || true
    say "lab $id: your code compiles, but its test program crashed before any test started (whole log: .cache/check-build-$id.log)"
  else
    echo compile_error >"$started"
    { grep -E "error|Error" "$log" || tail -n 5 "$log"; } | head -n 20 >&2 || true
    say "lab $id: your code does not compile (errors above; whole log: .cache/check-build-$id.log)"
  fi
}

# run_graded RUN_DIR ID...: builds the student variant of the labs' graded tests (build_graded) and runs those
# that built, each test in a sandbox of its own (grader/run_tests.py, grader/sandbox.py).
# RUN_DIR gets the grader's JUnit (junit.xml), each build's outcome (builds/) and each test's record (ends/),
# written outside the sandboxes under a random token made for this run (SPEEDLABS_GRADE_TOKEN, exported for
# grade.py; no test process sees it). The tests' progress goes to stderr.
run_graded() {
  local run_dir="$1" id built=() budgets=""
  shift
  python3 grader/sandbox.py probe || exit 2
  [[ "${SPEEDLABS_SANDBOX:-}" != off ]] || say "SPEEDLABS_SANDBOX=off: the graded code runs WITHOUT a sandbox (trusted code only)"
  prepare_graded_build
  rm -rf -- "$run_dir"
  mkdir -p "$run_dir/ends" "$run_dir/builds"
  # Each lab is built and tested in its own copy of the tree (lab_copy).
  copies="$root/$graded_build-labs"
  export SPEEDLABS_SANDBOX_TREE="$root/$graded_build" SPEEDLABS_SANDBOX_COPIES="$copies"
  rm -rf -- "$copies"
  for id in "$@"; do build_graded "$run_dir" "$id"; done
  for id in "$@"; do [[ "$(cat "$run_dir/builds/$id")" != built ]] || built+=("$id"); done
  SPEEDLABS_GRADE_TOKEN="$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
  export SPEEDLABS_GRADE_TOKEN
  if ((${#built[@]})); then
    for id in "${built[@]}"; do budgets+="${budgets:+, }lab $id $(awk -F'\t' 'NR > 1 && $4 > m {m = $4} END {print m}' "tests/lab$id/points.tsv") s"; done
    say "running the graded tests of lab ${built[*]}, each in a sandbox; a test still running after its exercise's budget is stopped ($budgets at most)"
    in_own_group python3 grader/run_tests.py "$graded_build" "$run_dir" "${built[@]}" || true
  fi
  [[ -f "$run_dir/junit.xml" ]] || echo '<testsuite/>' >"$run_dir/junit.xml"
}
