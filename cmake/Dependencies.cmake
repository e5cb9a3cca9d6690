# Every external dependency of the project, found in one place.

# libtorch: from the PyPI torch wheel (./lab setup), or any libtorch named by CMAKE_PREFIX_PATH / Torch_DIR.
find_package(Torch QUIET)
if(NOT Torch_FOUND)
  message(FATAL_ERROR
    "libtorch not found. Run ./lab setup (it installs torch==2.13.0 into .venv), or point "
    "CMAKE_PREFIX_PATH or Torch_DIR at a libtorch 2.4 or newer.")
endif()
if(Torch_VERSION VERSION_LESS 2.4)
  message(FATAL_ERROR "libtorch ${Torch_VERSION} is too old: speedlabs needs 2.4 or newer (found in ${Torch_DIR}).")
endif()
message(STATUS "libtorch ${Torch_VERSION} from ${Torch_DIR}")
# libtorch 2.14's headers require C++20 (they #error under C++17); 2.4 to 2.13 build with the project's C++17.
if(Torch_VERSION VERSION_GREATER_EQUAL 2.14)
  set(CMAKE_CXX_STANDARD 20)
endif()
# Python with torch, for the parity tests (lab 05) and the Python peers (lab 06): by default the
# interpreter of the venv whose torch wheel provides libtorch (<venv>/lib/pythonX/site-packages/torch/share/cmake/Torch).
get_filename_component(speedlabs_torch_venv "${Torch_DIR}/../../../../../../.." ABSOLUTE)
set(speedlabs_default_python "")
if(EXISTS "${speedlabs_torch_venv}/bin/python")
  set(speedlabs_default_python "${speedlabs_torch_venv}/bin/python")
endif()
set(SPEEDLABS_PYTHON "${speedlabs_default_python}" CACHE FILEPATH
    "Python with torch for the parity tests and lab 06's peers (empty: those are skipped)")
if(NOT SPEEDLABS_PYTHON)
  message(STATUS "no Python with torch next to libtorch: set SPEEDLABS_PYTHON to run the parity tests")
endif()
# TorchConfig puts the ABI flag into TORCH_CXX_FLAGS; every target must agree with it.
set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} ${TORCH_CXX_FLAGS}")
set(SPEEDLABS_TORCH_HAS_CUDA OFF)
if(TARGET torch_cuda OR CAFFE2_USE_CUDA OR USE_CUDA)
  set(SPEEDLABS_TORCH_HAS_CUDA ON)
endif()

find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
# toml++: the students' predictions files (labs/NN_topic/predictions.toml), Debian's libtomlplusplus-dev.
find_package(tomlplusplus 3 REQUIRED)
if(SPEEDLABS_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()

# The project's own CUDA kernels: compiled wherever nvcc is found, run only where a GPU is.
set(SPEEDLABS_HAVE_CUDA_COMPILER OFF)
if(SPEEDLABS_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT CMAKE_CUDA_ARCHITECTURES)  # unset, or OFF (a CUDA libtorch turns it off)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)   # A100 and H100/H200, the GPUs the lessons talk about
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(SPEEDLABS_HAVE_CUDA_COMPILER ON)
  endif()
endif()
message(STATUS "speedlabs: exercises from ${SPEEDLABS_EXERCISES}/, own CUDA kernels ${SPEEDLABS_HAVE_CUDA_COMPILER}, libtorch CUDA ${SPEEDLABS_TORCH_HAS_CUDA}")

# ccache, set up so that every build folder and every clone of the same commit shares its compiles:
# base_dir makes the checkout's absolute paths (sources, includes, the libtorch in .venv/) relative to the
# build folder before hashing; hash_dir off leaves the build folder's own path out; the sloppiness lets a
# compile that uses the precompiled header be cached (ccache's manual, "Precompiled headers").
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(speedlabs_ccache "${CMAKE_COMMAND}" -E env "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}" CCACHE_NOHASHDIR=1
      "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime" "${CCACHE_PROGRAM}")
  set(CMAKE_CXX_COMPILER_LAUNCHER ${speedlabs_ccache})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${speedlabs_ccache})
endif()
