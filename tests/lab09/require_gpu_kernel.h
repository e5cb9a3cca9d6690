/// @file tests/lab09/require_gpu_kernel.h
/// @brief LAB09_REQUIRE_GPU_KERNEL(): skips the calling test, saying why, where there is no CUDA GPU or no
/// nvcc compiled lab 09's kernel. A skip is decided here, by the harness, never by the code under test.
#pragma once
#include <gtest/gtest.h>

#include "common/device.h"
#ifdef SPEEDLABS_LAB09_CUDA_KERNEL
#include "flash_attention.h"
#endif

namespace lab09::testing {
#ifdef SPEEDLABS_LAB09_CUDA_KERNEL
inline constexpr bool kHaveKernel = true;
#else
inline constexpr bool kHaveKernel = false;
#endif
}  // namespace lab09::testing

#define LAB09_REQUIRE_GPU_KERNEL()                                                                           \
  do {                                                                                                       \
    if (!speedlabs::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible to libtorch";                     \
    if (!lab09::testing::kHaveKernel) GTEST_SKIP() << "the kernel was not compiled (no nvcc in this build)"; \
  } while (0)
