# The one helper every lab uses, so no lab copies flags.
#
#   speedlabs_add_lab(ID 01
#     SOURCES experiment.cpp            # the lab's experiment in its src/, shared by its program and its tests
#     [EXERCISE]                        # exercise.cpp comes from labs/<folder> or solutions/<folder>
#     [PROGRAM lab01]                   # executable name (default labNN), built into <build>/bin
#     [LIBS ...]                        # extra libraries (datasets, Eigen)
#     [CUDA_KERNEL reduction]           # the lab's optional CUDA kernel: reduction.cu behind reduction.h
#     [USES_EXERCISES 03 ...]           # earlier labs whose exercise this lab runs (their stubs or answers)
#     [TESTS tests/labNN/test_x.cpp]    # GoogleTest sources, relative to the repository root
#     [GPU_TESTS ...]                   # tests that need a GPU (they GTEST_SKIP without one); label gpu
#     [GRADED_TESTS tests/labNN/graded.cpp]  # the tests ./lab check and ./lab grade run on a student's code
#     [SMOKE_ARGS ...]                  # extra arguments for the smoke run (--quick --json are given)
#     [ALL_CORES Lab13Peer ...]         # tests (Suite or Suite.Name) that train on every core: run alone
#     [BAD_ARGS "--n 0" ...])           # more argument lists that must stop with exit code 2
#
# Graded tests: suite names LabNN_<exercise function> (one line per exercise in ./lab check), points and
# each exercise's time budget per test in tests/labNN/points.tsv beside them, labels labNN and graded; they
# link the earlier labs' exercises from solutions/, so a lab's score depends on its own code alone. A graded
# test that needs a GPU calls GTEST_SKIP() without one and is reported as skipped, never as passed.
#
# CUDA_KERNEL name: name.cu, with its plain C++ interface name.h (no CUDA headers) in the lab's src/ (at the
# folder's top when it is a GPU exercise), is
# compiled only where nvcc is found, and the lab's code and tests then see SPEEDLABS_LABNN_CUDA_KERNEL (lab
# NN's id) and may call it; without nvcc they compile without it and say why its observations are not
# applicable. Where solutions/ holds a reference name.cu, the kernel is a GPU exercise and comes from the
# exercise tree like exercise.cpp (the labs/ stub or the solutions/ reference); otherwise it is the lab's own.
# It may use the project's CUDA harness, common/cuda/kernels.h.
#
# Every lab also gets bad-input tests that need no argument of its own: an unknown flag, an unknown
# --device and an unwritable --json path must each stop with a message and exit code 2.
#
# Each target reuses one of two precompiled headers (common/CMakeLists.txt), the lighter its sources allow:
# - all of <torch/torch.h> (speedlabs_common_nn's) where a source includes it, directly or through a project
#   header: the units that use torch::nn, optim or autograd functions;
# - tensors only, <torch/types.h> (speedlabs_common's), where the sources include only <torch/types.h>,
#   <torch/utils.h>, small libtorch headers or ATen headers;
# - none where they include no libtorch header.
# What each costs (an empty main(), quiet 2-core VM): 2 s with the tensor header, 5 s with the torch header,
# 19 s with <torch/torch.h> and no precompiled header. Every unit that reads a precompiled header pays for
# its deferred template instantiations, so a unit gets no more of libtorch than it includes.

# PIE and PIC code both work in an executable; making them the same lets one PCH serve every target.
set(CMAKE_CXX_COMPILE_OPTIONS_PIE "${CMAKE_CXX_COMPILE_OPTIONS_PIC}")

# The configuring machine's logical cores, read once: each lab's smoke run takes them all (PROCESSORS below).
cmake_host_system_information(RESULT SPEEDLABS_LOGICAL_CORES QUERY NUMBER_OF_LOGICAL_CORES)

# At most one compile or link per logical core, and per 2 GiB of memory (a libtorch unit peaks near 1.8 GB).
# Ninja's default, cores + 2, left three or four libtorch units sharing two cores: the same six units took
# 59 s at two jobs and 64-68 s at four (quiet 2-core VM), the units' memory fighting for the caches.
cmake_host_system_information(RESULT speedlabs_memory_mib QUERY TOTAL_PHYSICAL_MEMORY)
math(EXPR speedlabs_build_jobs "${speedlabs_memory_mib} / 2048")
if(speedlabs_build_jobs GREATER SPEEDLABS_LOGICAL_CORES)
  set(speedlabs_build_jobs ${SPEEDLABS_LOGICAL_CORES})
elseif(speedlabs_build_jobs LESS 1)
  set(speedlabs_build_jobs 1)
endif()
set_property(GLOBAL APPEND PROPERTY JOB_POOLS "speedlabs_build=${speedlabs_build_jobs}")
set(CMAKE_JOB_POOL_COMPILE speedlabs_build)
set(CMAKE_JOB_POOL_LINK speedlabs_build)

# Sets @p out to how much of libtorch @p file includes, itself or through the project headers it includes:
# "torch" (<torch/torch.h> or any other libtorch header: <torch/nn.h>, ...), "tensor" (<torch/types.h>,
# <torch/utils.h>, the small <torch/cuda.h>, <torch/mps.h>, <torch/version.h>, or an ATen header) or ""
# (none). A "..." include is looked for as the compiler's include path finds it: beside the file, in the lab's
# folder (a solution's, whose stubs' folder is the include path, or the folder of the CMakeLists.txt adding the
# target) and from the repository's root. Remembered per file.
function(speedlabs_includes_torch file out)
  get_property(known GLOBAL PROPERTY "speedlabs_torch:${file}" SET)
  if(NOT known)
    set_property(GLOBAL PROPERTY "speedlabs_torch:${file}" "")  # an include cycle ends here
    set(found "")
    file(STRINGS "${file}" includes REGEX "^[ \t]*#[ \t]*include")
    get_filename_component(folder "${file}" DIRECTORY)
    string(REPLACE "${PROJECT_SOURCE_DIR}/solutions/" "${PROJECT_SOURCE_DIR}/labs/" stubs_folder "${folder}")
    foreach(line IN LISTS includes)
      if(line MATCHES "<torch/(types|utils|cuda|mps|version)\\.h>" OR line MATCHES "<ATen/")
        if(NOT found)
          set(found "tensor")
        endif()
      elseif(line MATCHES "<torch/")
        set(found "torch")
      elseif(line MATCHES "\"([^\"]+)\"")
        set(name "${CMAKE_MATCH_1}")
        foreach(candidate "${folder}/${name}" "${stubs_folder}/${name}" "${CMAKE_CURRENT_SOURCE_DIR}/${name}"
                          "${PROJECT_SOURCE_DIR}/${name}")
          if(EXISTS "${candidate}" AND NOT IS_DIRECTORY "${candidate}")
            speedlabs_includes_torch("${candidate}" nested)
            if(nested STREQUAL "torch" OR (nested STREQUAL "tensor" AND NOT found))
              set(found "${nested}")
            endif()
            break()
          endif()
        endforeach()
      endif()
      if(found STREQUAL "torch")
        break()
      endif()
    endforeach()
    set_property(GLOBAL PROPERTY "speedlabs_torch:${file}" "${found}")
  endif()
  get_property(value GLOBAL PROPERTY "speedlabs_torch:${file}")
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

function(speedlabs_use_pch target)
  if(target STREQUAL "speedlabs_common" OR target STREQUAL "speedlabs_common_nn")
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(folder ${target} SOURCE_DIR)
  set(needs "")
  foreach(source IN LISTS sources)
    get_filename_component(path "${source}" ABSOLUTE BASE_DIR "${folder}")
    if(EXISTS "${path}")
      speedlabs_includes_torch("${path}" uses)
      if(uses STREQUAL "torch" OR (uses STREQUAL "tensor" AND NOT needs))
        set(needs "${uses}")
      endif()
    endif()
  endforeach()
  if(needs STREQUAL "torch")
    target_precompile_headers(${target} REUSE_FROM speedlabs_common_nn)
  elseif(needs STREQUAL "tensor")
    target_precompile_headers(${target} REUSE_FROM speedlabs_common)
  endif()
endfunction()

# main() of every test executable (tests/support/test_main.cpp): GoogleTest's, plus what grading reads (each
# test's end as GoogleTest saw it, written only for ./lab check and ./lab grade) and exit code 77 when every
# test that ran was skipped. No libtorch in it: it compiles in seconds.
if(SPEEDLABS_TESTS)
  add_library(speedlabs_test_main STATIC "${PROJECT_SOURCE_DIR}/tests/support/test_main.cpp")
  target_link_libraries(speedlabs_test_main PUBLIC GTest::gtest)
  # Every test program links this too (speedlabs_add_gtest): its MKL vector math is set up on one thread before
  # any test runs (common/precision.h, prepare_vector_math); an OBJECT library, so its test environment is kept.
  add_library(speedlabs_prepared_vector_math OBJECT "${PROJECT_SOURCE_DIR}/tests/support/prepared_vector_math.cpp")
  target_link_libraries(speedlabs_prepared_vector_math PUBLIC speedlabs_common GTest::gtest)
endif()

#   speedlabs_add_gtest(name SOURCES ... [LIBS ...] [LABELS ...] [POINTS tests/labNN/points.tsv])
# POINTS: the tests are graded; each suite LabNN_<exercise> gets the time budget of its exercise's line
# (column budget_s) as its CTest TIMEOUT, so a looping exercise is stopped in seconds. A speed exercise's line
# (<function>_speed) also holds its rule, the speed fractions that earn full points and none (speed_full,
# speed_zero: a number, or N/D); the test and the outside check read them from the header written here,
# "tests/labNN/speed_rules.h" (speedlabs_write_speed_rules), so the rule is declared once.
# The C++ line of one points.tsv row's speed rule in ${out} ("" for an exercise that is not about speed); a speed
# exercise without both thresholds, or another with either, stops the configure.
function(speedlabs_speed_rule points exercise fields out)
  list(LENGTH fields count)
  set(full "")
  set(zero "")
  if(count GREATER 8)
    message(FATAL_ERROR "${points}: ${exercise} has more columns than the header's eight")
  endif()
  if(count GREATER 5)
    list(GET fields 5 full)
  endif()
  if(count GREATER 6)
    list(GET fields 6 zero)
  endif()
  set(${out} "" PARENT_SCOPE)
  if(NOT exercise MATCHES "_speed$")
    if(NOT full STREQUAL "" OR NOT zero STREQUAL "")
      message(FATAL_ERROR "${points}: ${exercise} is not a speed exercise (<function>_speed) but has a speed rule")
    endif()
    return()
  endif()
  foreach(value IN ITEMS full zero)
    if(${value} MATCHES "^([0-9]+)/([0-9.]+)$")
      set(${value} "${CMAKE_MATCH_1}.0 / ${CMAKE_MATCH_2}")
    elseif(NOT ${value} MATCHES "^[0-9]*\\.?[0-9]+$")
      message(FATAL_ERROR "${points}: ${exercise} needs speed_full and speed_zero (a number or N/D), not '${${value}}'")
    endif()
  endforeach()
  set(${out} "inline constexpr SpeedThresholds ${exercise}{${full}, ${zero}};\n" PARENT_SCOPE)
endfunction()

# "tests/labNN/speed_rules.h" in the build tree, for test ${name} and the lab's outside check: @p rules (from
# speedlabs_speed_rule) in namespace labNN::speed_rules; written only when it changes.
function(speedlabs_write_speed_rules name lab rules)
  set(header "${PROJECT_BINARY_DIR}/generated/tests/${lab}/speed_rules.h")
  file(CONFIGURE OUTPUT "${header}" CONTENT
"// Written by cmake/SpeedLab.cmake from tests/${lab}/points.tsv (speed_full, speed_zero): edit that file.
#pragma once

namespace ${lab}::speed_rules {
/// The speed fractions (the best's time over the exercise's) that earn full points and none.
struct SpeedThresholds {
  double full;
  double zero;
};
${rules}}  // namespace ${lab}::speed_rules
" @ONLY)
  target_include_directories(${name} PRIVATE "${PROJECT_BINARY_DIR}/generated")
endfunction()

function(speedlabs_add_gtest name)
  cmake_parse_arguments(T "" "POINTS" "SOURCES;LIBS;LABELS;ALL_CORES" ${ARGN})
  list(TRANSFORM T_SOURCES PREPEND "${PROJECT_SOURCE_DIR}/")
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} speedlabs_prepared_vector_math speedlabs_test_main GTest::gtest)
  speedlabs_use_pch(${name})
  # A skip is what GoogleTest recorded (GTEST_SKIP(): the test main exits 77, SKIP_RETURN_CODE), never a
  # line of output. gtest_discover_tests also gives every test SKIP_REGULAR_EXPRESSION "[  SKIPPED ]",
  # which no property can take away (CTest adds expressions up), so CTest's own summary can still call a
  # test that printed that line skipped: grading never reads that verdict, only GoogleTest's own record of
  # each test (tests/support/test_main.cpp, grader/grade.py).
  gtest_discover_tests(${name}
    DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
  # Labels are set by a file CTest reads after the discovered tests: gtest_discover_tests would split a
  # list value ("lab04;graded") into stray property names, losing every label but the first.
  set(labels_file "${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake")
  set(budgets "")
  if(T_POINTS)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/${T_POINTS}")
    file(STRINGS "${PROJECT_SOURCE_DIR}/${T_POINTS}" rows)
    set(rules "")
    list(POP_FRONT rows)  # the header
    string(REGEX MATCH "lab[0-9][0-9]" lab "${T_POINTS}")
    string(REPLACE "lab" "Lab" suite_prefix "${lab}")
    foreach(row IN LISTS rows)
      string(REPLACE "\t" ";" fields "${row}")
      list(LENGTH fields count)
      if(count LESS 4)
        message(FATAL_ERROR "${T_POINTS}: '${row}' has no budget_s column (exercise, points, readme_anchor, budget_s)")
      endif()
      list(GET fields 0 exercise)
      list(GET fields 3 seconds)
      speedlabs_speed_rule("${T_POINTS}" "${exercise}" "${fields}" rule)
      string(APPEND rules "${rule}")
      # A speed test times its exercise against the reference: it runs alone (RUN_SERIAL), so that the
      # suite's other test job is not the load its verdict has to see through.
      set(serial "")
      if(exercise MATCHES "_speed$")
        set(serial " RUN_SERIAL TRUE")
      endif()
      string(APPEND budgets "  if(test MATCHES \"^${suite_prefix}_${exercise}\\\\.\")\n"
                            "    set_tests_properties(\"\${test}\" PROPERTIES TIMEOUT ${seconds}${serial})\n  endif()\n")
    endforeach()
    set(budgets "foreach(test IN LISTS ${name}_TESTS)\n${budgets}endforeach()\n")
    speedlabs_write_speed_rules(${name} ${lab} "${rules}")
  endif()
  # A test that trains on libtorch's threads (or starts workers) keeps every core busy: PROCESSORS takes every slot
  # of ./lab test, as for a lab's smoke run. Beside another test each of the two stalled on the other's threads:
  # lab 13's Python-peer test took 42 s in ./lab test against 2.7 s alone (quiet 2-core VM).
  # Every other test but a speed test (alone, RUN_SERIAL) shares the machine: there libtorch's OpenMP threads wait
  # for each other asleep (OMP_WAIT_POLICY=PASSIVE), not spinning. A thread that spins at a barrier while its
  # sibling waits for a core makes every small op wait a scheduler's time slice: lab 13's race tests took 0.4 s
  # alone and 12-35 s beside another test; lab 13's target test beside a CPU hog took 16.1 s spinning, 7.4 s
  # asleep (4.3 s alone, spinning). The tests check observations, not timings.
  set(busy "^$")
  if(T_ALL_CORES)
    list(JOIN T_ALL_CORES "|" busy)
    set(busy "^(${busy})(\\\\.|$)")
  endif()
  string(APPEND budgets "foreach(test IN LISTS ${name}_TESTS)\n"
                        "  if(test MATCHES \"${busy}\")\n"
                        "    set_tests_properties(\"\${test}\" PROPERTIES PROCESSORS ${SPEEDLABS_LOGICAL_CORES})\n"
                        "  elseif(NOT test MATCHES \"_speed\\\\.\")\n"
                        "    set_tests_properties(\"\${test}\" PROPERTIES ENVIRONMENT_MODIFICATION \"OMP_WAIT_POLICY=set:PASSIVE\")\n"
                        "  endif()\nendforeach()\n")
  # A lab's test named ...FromTheSmokeRun... checks the observations of the lab's smoke run (labNN.smoke, below),
  # read back from its report (tests/support/smoke_run.h) instead of a --quick run of its own: it requires that
  # run's fixture (speedlabs_add_lab's labNN_json), so CTest runs the smoke run first, once for all such tests.
  set(lab_label "")
  if(T_LABELS)
    list(GET T_LABELS 0 lab_label)
  endif()
  if(lab_label MATCHES "^lab[0-9][0-9]$")
    string(APPEND budgets "foreach(test IN LISTS ${name}_TESTS)\n"
                          "  if(test MATCHES \"FromTheSmokeRun\")\n"
                          "    set_tests_properties(\"\${test}\" PROPERTIES FIXTURES_REQUIRED ${lab_label}_json)\n"
                          "  endif()\nendforeach()\n")
  endif()
  file(WRITE "${labels_file}"
    "if(DEFINED ${name}_TESTS)\n  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${T_LABELS}\")\n${budgets}endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${labels_file}")
endfunction()

# The library of a lab's CUDA_KERNEL (see above), only where nvcc is found; its name in ${out}, else "".
function(speedlabs_add_cuda_kernel out id folder name)
  set(${out} "" PARENT_SCOPE)
  if(NOT SPEEDLABS_HAVE_CUDA_COMPILER)
    return()
  endif()
  # A GPU exercise comes from the exercise tree, like exercise.cpp (a student release has no solutions/:
  # there a kernel comes from the exercise tree wherever that tree holds it); the lab's own kernel from its src/.
  set(source "${CMAKE_CURRENT_SOURCE_DIR}/src/${name}.cu")
  set(exercise_source "${PROJECT_SOURCE_DIR}/${SPEEDLABS_EXERCISES}/${folder}/${name}.cu")
  if((EXISTS "${PROJECT_SOURCE_DIR}/solutions/${folder}/${name}.cu" OR NOT EXISTS "${PROJECT_SOURCE_DIR}/solutions")
     AND EXISTS "${exercise_source}")
    set(source "${exercise_source}")
  endif()
  set(kernel "lab${id}_cuda_kernel")
  add_library(${kernel} STATIC "${source}")
  target_include_directories(${kernel} PUBLIC "${CMAKE_CURRENT_SOURCE_DIR}" "${CMAKE_CURRENT_SOURCE_DIR}/src")
  # The shared runtime: the same libcudart a CUDA libtorch loads, not a second static copy.
  set_target_properties(${kernel} PROPERTIES CUDA_RUNTIME_LIBRARY Shared)
  target_link_libraries(${kernel} PUBLIC speedlabs_cuda_kernels)  # the harness, the runtime, the project's root
  target_compile_definitions(${kernel} INTERFACE SPEEDLABS_LAB${id}_CUDA_KERNEL)
  set(${out} ${kernel} PARENT_SCOPE)
endfunction()

#   speedlabs_use_openmp(TARGET [SOURCES ...])
# The sources (default: every source of TARGET) compiled with OpenMP, so that at::parallel_for in them runs on
# libtorch's own OpenMP threads: it is a header template, and in code compiled without OpenMP it runs its loop in
# one thread. Plain threads of our own would not do either: libtorch's OpenMP team keeps spinning for a while
# after each of its ops, and threads started right after share the cores with it. The sources leave the shared
# precompiled headers and the unity build, whose flags they no longer share; TARGET links the OpenMP runtime
# only, so its other sources keep the header.
function(speedlabs_use_openmp target)
  cmake_parse_arguments(O "" "" "SOURCES" ${ARGN})
  find_package(OpenMP REQUIRED COMPONENTS CXX)
  if(NOT O_SOURCES)
    get_target_property(O_SOURCES ${target} SOURCES)
  endif()
  set_source_files_properties(${O_SOURCES} PROPERTIES COMPILE_OPTIONS "${OpenMP_CXX_FLAGS}"
                              SKIP_UNITY_BUILD_INCLUSION ON SKIP_PRECOMPILE_HEADERS ON)
  target_link_libraries(${target} PUBLIC ${OpenMP_CXX_LIBRARIES})
endfunction()

function(speedlabs_add_lab)
  cmake_parse_arguments(LAB "EXERCISE" "ID;PROGRAM;CUDA_KERNEL" "SOURCES;LIBS;USES_EXERCISES;TESTS;GPU_TESTS;GRADED_TESTS;SMOKE_ARGS;BAD_ARGS;ALL_CORES" ${ARGN})
  if(NOT LAB_ID)
    message(FATAL_ERROR "speedlabs_add_lab: ID is required")
  endif()
  get_filename_component(folder "${CMAKE_CURRENT_SOURCE_DIR}" NAME)
  set(label "lab${LAB_ID}")
  set(core "${label}_core")
  if(NOT LAB_PROGRAM)
    set(LAB_PROGRAM "${label}")
  endif()

  set(cuda_kernel "")
  if(LAB_CUDA_KERNEL)
    speedlabs_add_cuda_kernel(cuda_kernel ${LAB_ID} "${folder}" "${LAB_CUDA_KERNEL}")
  endif()

  # Object libraries: the experiment and main() are compiled once and linked with either exercise. The lab's own
  # code is in src/, apart from the student's files at the folder's top; a quoted include finds either.
  list(TRANSFORM LAB_SOURCES PREPEND "src/")
  add_library(${core} OBJECT ${LAB_SOURCES})
  target_include_directories(${core} PUBLIC "${CMAKE_CURRENT_SOURCE_DIR}" "${CMAKE_CURRENT_SOURCE_DIR}/src")
  target_link_libraries(${core} PUBLIC speedlabs_common ${LAB_LIBS} ${cuda_kernel})
  # An earlier lab's exercise that this lab runs: its headers, and its objects in every program and test
  # of this lab, so the student's own earlier answer is what runs here too.
  # Transitively: lab 08 uses lab 05's exercise, which runs lab 03's.
  set(uses "")
  foreach(id IN LISTS LAB_USES_EXERCISES)
    get_property(closure GLOBAL PROPERTY speedlabs_uses_${id})
    list(APPEND uses ${closure} ${id})
  endforeach()
  list(REMOVE_DUPLICATES uses)
  set_property(GLOBAL PROPERTY speedlabs_uses_${LAB_ID} ${uses})
  set_property(GLOBAL PROPERTY speedlabs_folder_${LAB_ID} ${folder})
  set(LAB_USES_EXERCISES ${uses})
  set(earlier "")
  foreach(id IN LISTS LAB_USES_EXERCISES)
    target_link_libraries(${core} PUBLIC lab${id}_core)  # usage requirements only: objects are linked below
    list(APPEND earlier lab${id}_core lab${id}_exercise)
  endforeach()
  speedlabs_use_pch(${core})
  add_library(${label}_main OBJECT src/main.cpp)
  target_link_libraries(${label}_main PUBLIC ${core})
  speedlabs_use_pch(${label}_main)

  # The switch between a student's stubs and the reference implementation.
  set(exercise "")
  if(LAB_EXERCISE)
    set(exercise "${label}_exercise")
    add_library(${exercise} OBJECT "${PROJECT_SOURCE_DIR}/${SPEEDLABS_EXERCISES}/${folder}/exercise.cpp")
    target_link_libraries(${exercise} PUBLIC ${core})
    speedlabs_use_pch(${exercise})
  endif()

  add_executable(${LAB_PROGRAM})
  target_link_libraries(${LAB_PROGRAM} PRIVATE ${label}_main ${core} ${exercise} ${earlier})
  set_target_properties(${LAB_PROGRAM} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/bin")

  # CI's CUDA compile check: the same objects linked with the labs/ stubs too, as <program>_student.
  if(LAB_EXERCISE AND SPEEDLABS_STUDENT_VARIANTS AND SPEEDLABS_EXERCISES STREQUAL "solutions")
    add_library(${exercise}_student OBJECT "${PROJECT_SOURCE_DIR}/labs/${folder}/exercise.cpp")
    target_link_libraries(${exercise}_student PUBLIC ${core})
    speedlabs_use_pch(${exercise}_student)
    add_executable(${LAB_PROGRAM}_student)
    set(earlier_student "")
    foreach(id IN LISTS LAB_USES_EXERCISES)
      list(APPEND earlier_student lab${id}_core lab${id}_exercise_student)
    endforeach()
    target_link_libraries(${LAB_PROGRAM}_student PRIVATE ${label}_main ${core} ${exercise}_student ${earlier_student})
    set_target_properties(${LAB_PROGRAM}_student PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/bin")
  endif()

  if(SPEEDLABS_TESTS)
    if(LAB_TESTS)
      speedlabs_add_gtest(test_${label} SOURCES ${LAB_TESTS} LIBS ${core} ${exercise} ${earlier} LABELS ${label}
                          ALL_CORES ${LAB_ALL_CORES})
    endif()
    if(LAB_GPU_TESTS)
      speedlabs_add_gtest(test_${label}_gpu SOURCES ${LAB_GPU_TESTS} LIBS ${core} ${exercise} ${earlier}
                          LABELS "${label};gpu")
    endif()
    if(LAB_GRADED_TESTS)
      # A lab's score depends on that lab's code alone: its graded tests run the earlier labs' exercises
      # from solutions/ (in the reference build those are the objects above), so a broken lab 05 costs lab
      # 05's points and never lab 09's. The lab's program and other tests keep the student's earlier code.
      set(earlier_reference "")
      foreach(id IN LISTS LAB_USES_EXERCISES)
        if(SPEEDLABS_EXERCISES STREQUAL "solutions" OR NOT EXISTS "${PROJECT_SOURCE_DIR}/solutions")
          # (a student release has no solutions/: the student's earlier exercises, as in their programs)
          list(APPEND earlier_reference lab${id}_core lab${id}_exercise)
        else()
          if(NOT TARGET lab${id}_exercise_reference)
            get_property(earlier_folder GLOBAL PROPERTY speedlabs_folder_${id})
            add_library(lab${id}_exercise_reference OBJECT "${PROJECT_SOURCE_DIR}/solutions/${earlier_folder}/exercise.cpp")
            target_link_libraries(lab${id}_exercise_reference PUBLIC lab${id}_core)
            speedlabs_use_pch(lab${id}_exercise_reference)
          endif()
          list(APPEND earlier_reference lab${id}_core lab${id}_exercise_reference)
        endif()
      endforeach()
      speedlabs_add_gtest(test_${label}_graded SOURCES ${LAB_GRADED_TESTS} LIBS ${core} ${exercise} ${earlier_reference}
                          LABELS "${label};graded" POINTS tests/${label}/points.tsv ALL_CORES ${LAB_ALL_CORES})
      # The outside check (tests/support/checked.h), where tests/labNN/checked.cpp exists: the same objects
      # as the graded tests. Its self-check on this build: the outputs read back equal, a changed byte caught.
      # (the folder's time tells CMake to look again when the file comes or goes)
      set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/tests/${label}")
      if(EXISTS "${PROJECT_SOURCE_DIR}/tests/${label}/checked.cpp")
        if(NOT TARGET speedlabs_checked_main)  # compiled once for every lab
          add_library(speedlabs_checked_main STATIC "${PROJECT_SOURCE_DIR}/tests/support/checked_main.cpp")
          target_link_libraries(speedlabs_checked_main PUBLIC speedlabs_common)
          speedlabs_use_pch(speedlabs_checked_main)
        endif()
        add_executable(checked_${label} "${PROJECT_SOURCE_DIR}/tests/${label}/checked.cpp")
        target_include_directories(checked_${label} PRIVATE "${PROJECT_BINARY_DIR}/generated")  # speed_rules.h
        target_link_libraries(checked_${label} PRIVATE ${core} ${exercise} ${earlier_reference} speedlabs_checked_main)
        speedlabs_use_pch(checked_${label})
        if(SPEEDLABS_EXERCISES STREQUAL "solutions")
          add_test(NAME ${label}.checked_outside
            COMMAND python3 "${PROJECT_SOURCE_DIR}/grader/selftest.py" check $<TARGET_FILE:checked_${label}>)
          set_tests_properties(${label}.checked_outside PROPERTIES LABELS ${label} TIMEOUT 300
                               PROCESSORS ${SPEEDLABS_LOGICAL_CORES})
          # Its speed exercises timed outside (grader/outside_timing.py) or raced to a target outside
          # (grader/outside_race.py), where checked.cpp has any: alone on the machine, as a lab program
          # runs, since they time.
          file(READ "${PROJECT_SOURCE_DIR}/tests/${label}/checked.cpp" checked_source)
          foreach(speed IN ITEMS Timed Raced)
            string(TOLOWER "${speed}" kind)
            if(checked_source MATCHES "std::vector<${speed}> ${kind}\\(\\)")
              add_test(NAME ${label}.${kind}_outside
                COMMAND python3 "${PROJECT_SOURCE_DIR}/grader/selftest.py" ${kind}
                        $<TARGET_FILE:checked_${label}>)
              set_tests_properties(${label}.${kind}_outside PROPERTIES LABELS ${label} TIMEOUT 600
                                   PROCESSORS ${SPEEDLABS_LOGICAL_CORES})
            endif()
          endforeach()
        endif()
      endif()
    endif()
    # Exit 5 (a timed claim this run could not decide, e.g. on a busy machine) is not a failure; 1 is.
    # A lab program keeps every core busy (libtorch's threads, or its workers): PROCESSORS takes every slot
    # of ./lab test, so no other test shares its cores. Beside one, its timings scattered, each measurement
    # took its whole budget, and the run took three times as long (lab 07: 118 s against 35 s alone).
    set(smoke_json "${CMAKE_CURRENT_BINARY_DIR}/${LAB_PROGRAM}.smoke.json")
    # The tour (./lab run) runs each lab as its smoke test does, so that this test can take the tour's run
    # (tests/smoke.sh): the lab's arguments beyond --quick, one a line.
    list(JOIN LAB_SMOKE_ARGS "\n" smoke_args)
    file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/${LAB_PROGRAM}.smoke.args" "${smoke_args}")
    add_test(NAME ${label}.smoke
      COMMAND bash "${PROJECT_SOURCE_DIR}/tests/smoke.sh" "${smoke_json}"
              $<TARGET_FILE:${LAB_PROGRAM}> --quick --json "${smoke_json}" ${LAB_SMOKE_ARGS})
    set_tests_properties(${label}.smoke PROPERTIES LABELS "${label};smoke" TIMEOUT 600 FIXTURES_SETUP ${label}_json
                         PROCESSORS ${SPEEDLABS_LOGICAL_CORES})
    # The lesson's "What you should observe" table lists exactly the ids of that report (and of the run kept
    # for the docs in docs/results/), so the lesson cannot drift from the code.
    add_test(NAME ${label}.docs_observe_table
      COMMAND python3 "${PROJECT_SOURCE_DIR}/scripts/driver/lab_pages.py" check-ids "${CMAKE_CURRENT_SOURCE_DIR}/README.md"
              "${CMAKE_CURRENT_BINARY_DIR}/${LAB_PROGRAM}.smoke.json")
    set_tests_properties(${label}.docs_observe_table PROPERTIES LABELS "${label};docs" FIXTURES_REQUIRED ${label}_json
                         TIMEOUT 60 SKIP_RETURN_CODE 77)

    set(bad_inputs "--no-such-flag" "--device tpu" "--json /nonexistent-folder/out.json" "--json /tmp" "--json --quick"
        ${LAB_BAD_ARGS})
    set(index 0)
    foreach(arguments IN LISTS bad_inputs)
      separate_arguments(argv UNIX_COMMAND "${arguments}")
      math(EXPR index "${index} + 1")
      add_test(NAME ${label}.bad_input_${index}
        COMMAND bash "${PROJECT_SOURCE_DIR}/tests/expect_exit.sh" 2 "error|Error|not in range|--help"
                $<TARGET_FILE:${LAB_PROGRAM}> ${argv})
      set_tests_properties(${label}.bad_input_${index} PROPERTIES LABELS "${label};bad_input" TIMEOUT 60)
    endforeach()
  endif()
endfunction()
