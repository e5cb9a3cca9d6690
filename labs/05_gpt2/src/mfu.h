/// @file labs/05_gpt2/src/mfu.h
/// @brief Lab 05's model FLOP utilisation: each mode's step against the measured matmul peak of its format and
/// against the theoretical peak (common/peaks, common/roofline).
#pragma once
#include <c10/core/Device.h>

#include <vector>

#include "common/gpt_config.h"
#include "common/observations.h"
#include "experiment.h"

namespace lab05 {

/// Records mfu (reported): for each mode trained, the model FLOPs of a step (6 N + 12 L C T per token, x B x T)
/// over its median step time, divided by the measured rate of a large matmul in the mode's format (fp32, tf32,
/// bf16, fp16) and by the theoretical peak of that format (CPU: cores x clock x FMA units x lanes x 2; GPU:
/// the datasheet). Decided on the first mode's timed steps.
/// @param results      the modes' results
/// @param config       the run (B, T, steps)
/// @param model_config the model
/// @param device       where it trained
/// @param report       receives the observation
void record_mfu(const std::vector<ModeResult>& results, const Config& config,
                const speedlabs::gpt::GPTConfig& model_config, const c10::Device& device, speedlabs::Report& report);

}  // namespace lab05
