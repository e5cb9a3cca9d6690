// Lab 04 reference solution of the GPU exercise: the sum of squares as a parallel reduction.
#include "common/cuda/kernels.h"
#include "reduction.h"

namespace lab04 {
namespace {

constexpr int kThreads = 256;  // threads per block: a power of two, for the tree

// Sums a value per thread across the block; thread 0 ends up with the block's total.
__device__ double block_sum(double value) {
  __shared__ double partial[kThreads];
  partial[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  return partial[0];
}

// One partial sum per block (of squares when Square); a fixed order, so the result is reproducible.
template <bool Square>
__global__ void reduce_blocks(const double* x, int64_t n, double* block_totals) {
  double value = 0.0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    value += Square ? x[i] * x[i] : x[i];
  }
  const double total = block_sum(value);
  if (threadIdx.x == 0) block_totals[blockIdx.x] = total;
}

}  // namespace

void launch_sum_squares_reduction(const double* x, int64_t n, double* partials, double* out) {
  const int64_t wanted = (n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < speedlabs::cuda::kMaxPartials ? wanted : speedlabs::cuda::kMaxPartials);
  reduce_blocks<true><<<blocks, kThreads>>>(x, n, partials);
  reduce_blocks<false><<<1, kThreads>>>(partials, blocks, out);
}

}  // namespace lab04
