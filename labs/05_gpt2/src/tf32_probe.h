/// @file tf32_probe.h
/// @brief TF32's layout probed, not quoted: what a float32 matmul keeps of its inputs under "high" precision.
#pragma once
#include <c10/core/Device.h>

#include "common/observations.h"

namespace lab05 {

/// tf32_keeps_10_fraction_bits: on a CUDA GPU with TF32 tensor cores (compute capability 8.0 or newer), a
/// float32 matmul under "high" precision rounds its inputs to TF32's 10 fraction bits (1 + 2^-12 becomes 1,
/// 1 + 2^-10 stays) while "highest" keeps float32's 23; not applicable elsewhere, with the reason.
void observe_tf32_layout(const c10::Device& device, speedlabs::Report& report);

}  // namespace lab05
