// Lab 12: bias + GELU (tanh) fused into one CUDA kernel: one read of x, one write of the output.
#include <cuda_runtime.h>

#include <algorithm>

#include "common/cuda/check.h"
#include "fused_bias_gelu.h"

namespace lab12::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxRowBlocks = 65535;  // the grid's y dimension

__global__ void bias_gelu_kernel(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ out,
                                 int64_t rows, int64_t cols) {
  const float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
  const float kKappa = 0.044715f;
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const float* in_row = x + row * cols;
    float* out_row = out + row * cols;
    for (int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < cols;
         col += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const float v = in_row[col] + bias[col];  // stays in a register
      out_row[col] = 0.5f * v * (1.0f + tanhf(kBeta * (v + kKappa * v * v * v)));
    }
  }
}

}  // namespace

void fused_bias_gelu(const float* x, const float* bias, float* out, int64_t rows, int64_t cols) {
  if (rows == 0 || cols == 0) return;
  const dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads),
                  static_cast<unsigned>(std::min<int64_t>(rows, kMaxRowBlocks)));
  bias_gelu_kernel<<<grid, kThreads>>>(x, bias, out, rows, cols);
  SPEEDLABS_CUDA_CHECK(cudaGetLastError());  // a bad launch configuration shows here
}

}  // namespace lab12::cuda
