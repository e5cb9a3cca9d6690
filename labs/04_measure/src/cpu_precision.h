/// @file labs/04_measure/src/cpu_precision.h
/// @brief Lab 04 on the CPU: the lesson's model in fp32 and under bf16 autocast, timed in rounds side by side.
#pragma once
#include "common/observations.h"
#include "experiment.h"
#include "measurement.h"

namespace lab04 {

/// The two CPU variants of the lesson's model.
struct CpuResult {
  Variant fp32;  ///< in float32
  Variant bf16;  ///< under bfloat16 autocast
};

/// Times fp32 against bf16 autocast on the CPU (lab04::measure_pair(), the exercise) and records
/// autocast_bf16_output_dtype, cpu_fp32_ms, cpu_bf16_ms and cpu_bf16_vs_fp32.
CpuResult run_cpu(const Config& config, speedlabs::Report& report);

}  // namespace lab04
