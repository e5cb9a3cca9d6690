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

/// The two ways the sum-of-squares kernel is written.
enum class SumSquaresMethod {
  serial,   ///< one GPU thread loops over every element: the GPU used like a slow CPU core
  parallel  ///< a grid-stride loop over many blocks, a shared-memory tree per block, then one block sums the partials
};

/// "serial" or "parallel".
std::string to_string(SumSquaresMethod method);

/// What one sum_squares() call computed and how long each launch took.
struct KernelRun {
  double sum = 0;                ///< the result of the last launch, copied back to the host
  double first_ms = 0;           ///< the very first launch (includes loading the kernel)
  std::vector<double> times_ms;  ///< each measured launch, timed on the GPU with CUDA events
};

/// Sum of x[i]^2 over @p n host doubles, computed on GPU 0.
///
/// The data is copied to the GPU once; then the kernel runs @p warmup times unmeasured and
/// @p repeats times measured, each launch bracketed by CUDA events (kernel time only, no copies).
/// @param x        host pointer to n doubles
/// @param n        how many values (at least 1)
/// @param method   serial (one thread) or parallel (a reduction)
/// @param warmup   unmeasured launches before the measured ones (0 or more)
/// @param repeats  measured launches (at least 1)
/// @return         the sum and the per-launch times
/// @throws std::invalid_argument for n < 1, warmup < 0 or repeats < 1;
///         std::runtime_error when there is no GPU or a CUDA call fails (with the runtime's message)
KernelRun sum_squares(const double* x, int64_t n, SumSquaresMethod method, int warmup, int repeats);

}  // namespace speedlabs::cuda
