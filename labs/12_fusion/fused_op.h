/// @file labs/12_fusion/fused_op.h
/// @brief Lab 12's second part: bias + GELU fused by hand against libtorch's unfused chain, placed on lab 07's
/// memory roof of this machine.
#pragma once
#include <c10/core/Device.h>

#include "common/observations.h"
#include "experiment.h"

namespace lab12 {

/// On the lab's device (Eigen on the CPU, the CUDA kernel on a GPU): measures lab 07's memory roof, checks and
/// times the fused op against the unfused chain into @p results, and records fused_matches_unfused,
/// fused_bytes_moved and fused_vs_unfused_time (not applicable on a GPU where nvcc built no kernel).
void run_fused_op(const Config& config, const c10::Device& device, Results& results, speedlabs::Report& report);

}  // namespace lab12
