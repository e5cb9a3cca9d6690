/// @file labs/04_measure/src/gpu.h
/// @brief Lab 04 on a GPU: the synchronize trap, bf16 against fp32 on tensor cores, and the project's own CUDA
/// kernel (one thread looping against your parallel reduction).
#pragma once
#include <string>

#include "common/observations.h"
#include "experiment.h"
#include "measurement.h"

namespace lab04 {

/// Times the lesson's model on the CUDA @p device at the lesson's and the large batch, with and without
/// synchronizing; records gpu_unsynced_time_is_misleading and gpu_bf16_vs_fp32. Returns the fp32 variant at the
/// lesson's batch (its first call is the GPU's first).
Variant run_gpu(const Config& config, const c10::Device& device, speedlabs::Report& report);

/// Records the observations of run_gpu() as not applicable, for @p reason.
void gpu_not_applicable(const std::string& reason, speedlabs::Report& report);

/// Sums squares with the project's one-thread kernel and lab04::launch_sum_squares_reduction, the GPU exercise;
/// records gpu_parallel_kernel_vs_serial and gpu_kernel_matches_cpu (not applicable without nvcc or a GPU).
void run_kernels(const Config& config, speedlabs::Report& report);

}  // namespace lab04
