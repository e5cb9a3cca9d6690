/// @file common/cuda/check.h
/// @brief SPEEDLABS_CUDA_CHECK: the one way the project's .cu files check a CUDA runtime call.
///
/// Only CUDA sources include it (it needs <cuda_runtime.h>). A failed call ends the experiment the way any
/// other runtime failure does (RuntimeFailure, exit 3), and its message says where and what failed.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "common/errors.h"

namespace speedlabs::cuda {

/// Throws RuntimeFailure "file:line: CUDA: expression failed: <the runtime's text>". Used by SPEEDLABS_CUDA_CHECK.
/// @param status      the failed call's result (not cudaSuccess)
/// @param expression  the call as written in the source
/// @param file        the source file that made it
/// @param line        its line there
[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* expression, const char* file, int line) {
  throw RuntimeFailure(std::string(file) + ":" + std::to_string(line) + ": CUDA: " + expression +
                       " failed: " + cudaGetErrorString(status));
}

}  // namespace speedlabs::cuda

/// Evaluates `expression` (a cudaError_t) once; anything but cudaSuccess throws speedlabs::RuntimeFailure with
/// the file, the line, the expression and cudaGetErrorString. After a kernel launch, check
/// cudaGetLastError(): a bad launch configuration shows there.
#define SPEEDLABS_CUDA_CHECK(expression)                                                           \
  do {                                                                                             \
    const cudaError_t speedlabs_cuda_status = (expression);                                        \
    if (speedlabs_cuda_status != cudaSuccess) {                                                    \
      ::speedlabs::cuda::throw_cuda_error(speedlabs_cuda_status, #expression, __FILE__, __LINE__); \
    }                                                                                              \
  } while (false)
