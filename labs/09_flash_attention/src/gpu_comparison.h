/// @file labs/09_flash_attention/src/gpu_comparison.h
/// @brief Lab 09 on a GPU: the tiled forward as this lab's CUDA kernel, checked against SDPA and timed with
/// CUDA events beside SDPA's flash and memory-efficient backends.
#pragma once
#include <c10/core/Device.h>

#include "common/observations.h"
#include "experiment.h"

namespace lab09 {

/// How far the kernel's output may be from SDPA's on the GPU. Both are float32 with float32 sums, but in a
/// different order and with fused multiply-adds, over up to T terms; 1e-4 is far above that rounding and far
/// below what a wrong mask, scale or rescaling costs (differences of order 0.1).
inline constexpr double kGpuTolerance = 1e-4;

/// On a CUDA @p device: at every T of @p config, runs the kernel of flash_attention.h, compares its output with
/// at::scaled_dot_product_attention on the same GPU, and times it, SDPA's memory-efficient backend (float32)
/// and SDPA's flash backend (bfloat16: it takes 16-bit inputs only), each with CUDA events; prints a table and
/// records cuda_kernel_matches_sdpa and cuda_kernel_vs_sdpa_time. Elsewhere, or where the kernel was not
/// built or not written (the optional exercise's stub), both are recorded as not applicable with the reason.
/// @param config the run (sizes, repeats)
/// @param device the lab's device
/// @param report receives the two observations
void compare_on_gpu(const Config& config, const c10::Device& device, speedlabs::Report& report);

}  // namespace lab09
