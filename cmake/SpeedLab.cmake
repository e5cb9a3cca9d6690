# The one helper every lab uses, so no lab copies flags.
#
#   speedlabs_add_lab(ID 01
#     SOURCES experiment.cpp            # the lab's experiment, shared by its program and its tests
#     [EXERCISE]                        # exercise.cpp comes from labs/<folder> or solutions/<folder>
#     [PROGRAM lab01]                   # executable name (default labNN), built into <build>/bin
#     [LIBS ...]                        # extra libraries (datasets, cuda kernels)
#     [TESTS tests/labNN/test_x.cpp]    # GoogleTest sources, relative to the repository root
#     [GPU_TESTS ...]                   # tests that need a GPU (they GTEST_SKIP without one); label gpu
#     [SMOKE_ARGS ...])                 # extra arguments for the smoke run (--quick --json are given)
#
# Every target reuses the precompiled libtorch header of speedlabs_common.

# PIE and PIC code both work in an executable; making them the same lets one PCH serve every target.
set(CMAKE_CXX_COMPILE_OPTIONS_PIE "${CMAKE_CXX_COMPILE_OPTIONS_PIC}")

function(speedlabs_use_pch target)
  if(NOT target STREQUAL "speedlabs_common")
    target_precompile_headers(${target} REUSE_FROM speedlabs_common)
  endif()
endfunction()

function(speedlabs_add_gtest name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  list(TRANSFORM T_SOURCES PREPEND "${PROJECT_SOURCE_DIR}/")
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE SPEEDLABS_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  speedlabs_use_pch(${name})
  gtest_discover_tests(${name}
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${T_LABELS}" TIMEOUT 600)
endfunction()

function(speedlabs_add_lab)
  cmake_parse_arguments(LAB "EXERCISE" "ID;PROGRAM" "SOURCES;LIBS;TESTS;GPU_TESTS;SMOKE_ARGS" ${ARGN})
  if(NOT LAB_ID)
    message(FATAL_ERROR "speedlabs_add_lab: ID is required")
  endif()
  get_filename_component(folder "${CMAKE_CURRENT_SOURCE_DIR}" NAME)
  set(label "lab${LAB_ID}")
  set(core "${label}_core")
  if(NOT LAB_PROGRAM)
    set(LAB_PROGRAM "${label}")
  endif()

  set(sources ${LAB_SOURCES})
  if(LAB_EXERCISE)
    # The switch between a student's stubs and the reference implementation.
    list(APPEND sources "${PROJECT_SOURCE_DIR}/${SPEEDLABS_EXERCISES}/${folder}/exercise.cpp")
  endif()
  add_library(${core} STATIC ${sources})
  target_include_directories(${core} PUBLIC "${CMAKE_CURRENT_SOURCE_DIR}")
  target_link_libraries(${core} PUBLIC speedlabs_common ${LAB_LIBS})
  speedlabs_use_pch(${core})

  add_executable(${LAB_PROGRAM} main.cpp)
  target_link_libraries(${LAB_PROGRAM} PRIVATE ${core})
  set_target_properties(${LAB_PROGRAM} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/bin")
  speedlabs_use_pch(${LAB_PROGRAM})

  if(SPEEDLABS_TESTS)
    if(LAB_TESTS)
      speedlabs_add_gtest(test_${label} SOURCES ${LAB_TESTS} LIBS ${core} LABELS ${label})
    endif()
    if(LAB_GPU_TESTS)
      speedlabs_add_gtest(test_${label}_gpu SOURCES ${LAB_GPU_TESTS} LIBS ${core} LABELS "${label};gpu")
    endif()
    add_test(NAME ${label}.smoke
      COMMAND ${LAB_PROGRAM} --quick --json "${CMAKE_CURRENT_BINARY_DIR}/${LAB_PROGRAM}.smoke.json" ${LAB_SMOKE_ARGS})
    set_tests_properties(${label}.smoke PROPERTIES LABELS "${label};smoke" TIMEOUT 600)
  endif()
endfunction()
