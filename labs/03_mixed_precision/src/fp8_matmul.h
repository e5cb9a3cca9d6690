/// @file labs/03_mixed_precision/src/fp8_matmul.h
/// @brief Lab 03, below 16 bits on a GPU: a matmul of fp8 inputs with per-tensor scales (at::_scaled_mm)
/// against the bf16 matmul, its error and its time. Only GPUs with fp8 tensor cores run it.
#pragma once
#include <c10/core/Device.h>

#include "common/observations.h"

namespace lab03 {

/// On a CUDA GPU: (M x K) @ (K x N) of random normal inputs, once in bf16 and once as e4m3fn with a scale per
/// tensor (amax / 448) through at::_scaled_mm, bf16 out; their largest difference over the largest bf16 value
/// (must hold within fp8's precision) and their times, interleaved (reported). Elsewhere, or on a GPU whose
/// libtorch has no fp8 matmul for it (compute capability below 8.9), fp8_scaled_mm_vs_bf16 is not_applicable
/// with the reason.
/// @param device  where the lab runs
/// @param report  receives fp8_scaled_mm_vs_bf16
void observe_fp8_scaled_mm(const c10::Device& device, speedlabs::Report& report);

}  // namespace lab03
