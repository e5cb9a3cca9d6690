/// @file common/cuda/kernels.h
/// @brief The project's own CUDA kernels, behind a plain C++ interface.
///
/// This header needs no CUDA headers, so any C++ file can include it. The implementation
/// (sum_squares.cu) is compiled only where nvcc is found; the library target
/// speedlabs_cuda_kernels then defines SPEEDLABS_HAVE_CUDA_KERNELS for everything that links it.
/// Every function asks the CUDA runtime itself whether a GPU is there, independently of libtorch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace speedlabs::cuda {

/// What the CUDA runtime reports about GPUs on this machine.
struct GpuPresence {
  int count = 0;       ///< GPUs the runtime can use (cudaGetDeviceCount); 0 when none
  std::string reason;  ///< why there is none (the runtime's error text), empty when count > 0
};

/// Asks the CUDA runtime (not libtorch) how many GPUs it sees. Never throws.
GpuPresence find_gpus();

/// Scratch space a sum-of-squares launch may use for partial sums: this many doubles.
constexpr int kMaxPartials = 1024;

/// Launches one sum of squares on GPU 0's current stream: x[0]^2 + ... + x[n-1]^2 into *out.
/// @param x         n doubles in device memory
/// @param n         how many (at least 1)
/// @param partials  device scratch space for kMaxPartials doubles
/// @param out       one double in device memory, overwritten with the sum
using SumSquaresLaunch = void (*)(const double* x, int64_t n, double* partials, double* out);

/// One GPU thread loops over every element: the GPU used like a slow CPU core. (The parallel
/// reduction is lab 04's exercise, lab04::launch_sum_squares_reduction.)
void launch_sum_squares_one_thread(const double* x, int64_t n, double* partials, double* out);

/// What one sum_squares() call computed and how long each launch took.
struct KernelRun {
  double sum = 0;                ///< the result of the last launch, copied back to the host
  double first_ms = 0;           ///< the very first launch (includes loading the kernel)
  std::vector<double> times_ms;  ///< each measured launch, timed on the GPU with CUDA events
};

/// Sum of x[i]^2 over @p n host doubles, computed on GPU 0 by @p launch.
///
/// The data is copied to the GPU once; then the kernel runs @p warmup times unmeasured and
/// @p repeats times measured, each launch bracketed by CUDA events (kernel time only, no copies).
/// @param x        host pointer to n doubles
/// @param n        how many values (at least 1)
/// @param launch   the kernel: launch_sum_squares_one_thread, or lab 04's parallel reduction
/// @param warmup   unmeasured launches before the measured ones (0 or more)
/// @param repeats  measured launches (at least 1)
/// @return         the sum and the per-launch times
/// @throws std::invalid_argument for n < 1, warmup < 0 or repeats < 1 or no launch;
///         std::runtime_error when there is no GPU or a CUDA call fails (with the runtime's message);
///         whatever @p launch throws (a stub's NotImplementedError)
KernelRun sum_squares(const double* x, int64_t n, SumSquaresLaunch launch, int warmup, int repeats);

}  // namespace speedlabs::cuda
