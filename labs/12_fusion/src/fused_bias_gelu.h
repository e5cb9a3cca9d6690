/// @file labs/12_fusion/src/fused_bias_gelu.h
/// @brief Bias + GELU (tanh) as a CUDA kernel, behind a plain C++ interface (no CUDA headers).
///
/// The kernel (fused_bias_gelu.cu) is compiled only where nvcc is found (the lab's CUDA_KERNEL in
/// cmake/SpeedLab.cmake); everything that links it then sees SPEEDLABS_LAB12_CUDA_KERNEL.
#pragma once
#include <cstdint>

namespace lab12::cuda {

/// out = gelu_tanh(x + bias) in one pass; a thread per element of a row, rows over the grid's y dimension.
/// Device pointers to contiguous float32 arrays; the launch goes on the default stream (libtorch's current
/// stream unless the caller changed it) and returns without waiting.
/// @param x    (rows, cols)
/// @param bias (cols)
/// @param out  receives (rows, cols)
/// @param rows the rows of x and out
/// @param cols the columns of x and out, and the length of bias
/// @throws std::runtime_error when the launch fails
void fused_bias_gelu(const float* x, const float* bias, float* out, int64_t rows, int64_t cols);

}  // namespace lab12::cuda
