// Lab 04 GPU exercise: the sum of squares as a parallel reduction, a CUDA kernel of your own.
// Replace the body, then check your work with ./lab check 04 (graded where a GPU is; elsewhere the
// check says it skipped this one, but CI still compiles your kernel).
#include "common/cuda/kernels.h"
#include "common/errors.h"
#include "reduction.h"

namespace lab04 {

// Why: one GPU thread is slower than a CPU core; a GPU is fast only when tens of thousands of threads
// work at once. The serial kernel (common/cuda/sum_squares.cu) walks 2^20 elements one after another;
// a reduction spreads them over many blocks and is limited by memory bandwidth instead. The lab times
// both and expects yours to be at least 100x faster (gpu_parallel_kernel_vs_serial), and to give the
// CPU's sum to a relative 1e-9 (gpu_kernel_matches_cpu).
//
// Hints:
//  - Two kernels in this file, launched with <<<blocks, threads>>>: blocks = ceil(n / threads), at
//    most speedlabs::cuda::kMaxPartials (1024), and threads a power of two such as 256.
//  - First kernel: each thread starts at i = blockIdx.x * blockDim.x + threadIdx.x and steps by
//    gridDim.x * blockDim.x (a grid-stride loop, so any n works with at most 1024 blocks), adding
//    x[i] * x[i] into its own double. Use int64_t for i: n can exceed 2^31.
//  - Then the block adds up its threads' values: a __shared__ double array of one slot per thread,
//    __syncthreads(), then halve the stride each step (threads below the stride add the slot one
//    stride away), with __syncthreads() after every step. Thread 0 writes slot 0 to partials[blockIdx.x].
//  - Second launch, one block: the same tree over the `blocks` partials (plain values, not squared),
//    thread 0 writes the result to *out. A template parameter <bool Square> lets one kernel do both.
//  - Launches return at once and report errors later: speedlabs::cuda::sum_squares() checks
//    cudaGetLastError() after your launch and synchronizes through its events.
void launch_sum_squares_reduction(const double* /*x*/, int64_t /*n*/, double* /*partials*/, double* /*out*/) {
  // TODO(lab04): a grid-stride sum of squares per block, a shared-memory tree per block, then one block
  // that sums the partials.
  speedlabs::not_implemented("04", "04_measure", "launch_sum_squares_reduction");
}

}  // namespace lab04
