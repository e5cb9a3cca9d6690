/// @file labs/12_fusion/src/fused_gelu.h
/// @brief A memory-bound op fused by hand: bias + GELU (tanh), the MLP's c_fc output, in one pass over memory,
/// beside libtorch's two passes (an add, then a GELU).
#pragma once
#include <torch/types.h>

namespace lab12 {

/// Floating-point operations per element of bias + GELU (tanh), counting each +, * and tanh as one:
/// the bias (1), x^3 (2), * 0.044715, + x, * sqrt(2/pi), tanh, + 1, * x, * 0.5.
inline constexpr double kBiasGeluFlops = 10;

/// gelu(x + bias, "tanh") in one pass: each element is read once, biased, put through the GELU and written
/// once; the biased value never goes to memory. On the CPU an Eigen expression over each block of a row
/// (vectorised at the build's native width, no temporaries) into a buffer in L1, streamed out with
/// non-temporal stores, rows split over libtorch's threads; on a CUDA device the kernel of
/// fused_bias_gelu.cu, where nvcc built it (std::runtime_error otherwise).
/// @param x    (rows, cols) float32, contiguous
/// @param bias (cols) float32, on x's device
/// @return     (rows, cols) float32
torch::Tensor fused_bias_gelu(const torch::Tensor& x, const torch::Tensor& bias);

/// fused_bias_gelu into @p out, (rows, cols) float32 contiguous on x's device: what the lab times, so that the
/// time is the op's traffic, not the kernel zeroing the fresh pages of a new 48 MiB output (lab 07's roofs
/// write into arrays made once, too).
void fused_bias_gelu_out(const torch::Tensor& x, const torch::Tensor& bias, torch::Tensor& out);

/// libtorch's unfused chain: torch::gelu(x + bias, "tanh"), which writes x + bias to memory and reads it back.
torch::Tensor unfused_bias_gelu(const torch::Tensor& x, const torch::Tensor& bias);

/// The unfused chain into arrays made once: at::add_out(@p biased, x, bias), then at::gelu_out(@p out, biased).
void unfused_bias_gelu_out(const torch::Tensor& x, const torch::Tensor& bias, torch::Tensor& biased,
                           torch::Tensor& out);

/// True when fused_bias_gelu can run on a CUDA device in this build (the kernel was compiled).
bool fused_kernel_built();

/// The fewest bytes each version moves for a (rows, cols) float32 input: the fused one reads x and the bias
/// and writes the output; the unfused one also writes x + bias and reads it back.
double fused_bytes(int64_t rows, int64_t cols);
/// See fused_bytes().
double unfused_bytes(int64_t rows, int64_t cols);

}  // namespace lab12
