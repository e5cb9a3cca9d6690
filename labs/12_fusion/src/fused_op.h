/// @file labs/12_fusion/src/fused_op.h
/// @brief Lab 12's second part: bias + GELU fused by hand against libtorch's unfused chain, placed on lab 07's
/// memory roof of this machine.
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "common/observations.h"
#include "experiment.h"

namespace lab12 {

/// On the lab's device (Eigen on the CPU, the CUDA kernel on a GPU): measures lab 07's memory roof, checks and
/// times the fused op against the unfused chain into @p results, and records fused_matches_unfused,
/// fused_bytes_moved and fused_vs_unfused_time (not applicable on a GPU where nvcc built no kernel).
void run_fused_op(const Config& config, const c10::Device& device, Results& results, speedlabs::Report& report);

/// MiB per array of the copy and the triad that lab 07's memory roof streams, on a CPU and on a GPU: far
/// beyond each one's caches.
inline constexpr int64_t kCpuRoofStreamMib = 64;
/// See kCpuRoofStreamMib.
inline constexpr int64_t kGpuRoofStreamMib = 1024;

/// Why fused_vs_unfused_time is only reported on this run, or "" when it must hold: it must where lab 07's
/// roofline puts bias + GELU below the ridge (memory bound: its intensity, 1.25 FLOP/byte, under @p ridge)
/// and each of its (rows, cols) float32 arrays is at least the roof's stream arrays (@p roof_stream_mib), so
/// the caches serve the op no more than they served the roof it is held against.
std::string fused_claim_exemption(int64_t rows, int64_t cols, double ridge, int64_t roof_stream_mib);

}  // namespace lab12
