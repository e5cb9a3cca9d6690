/// @file labs/03_mixed_precision/src/experiment.h
/// @brief Lab 03: autocast's per-op policy measured, loss scaling shown, and mixed-precision training
/// compared with float32.
#pragma once
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/observations.h"
#include "policy.h"

namespace lab03 {

/// The experiment's knobs.
struct Config {
  c10::Device device{c10::kCPU};           ///< where everything runs
  c10::ScalarType dtype = c10::kBFloat16;  ///< the autocast dtype of the dtype checks and the policy table
  int steps = 200;                         ///< training steps of each run (fp32, fp16 + scaler, bf16)
  int64_t batch = 256;                     ///< training examples (one full batch per step)
  int64_t hidden = 64;                     ///< width of the MLP's hidden layers
  uint64_t seed = 0;                       ///< data and initial weights
};

/// The lab's knobs, each once: its flags with their defaults (Config) and --quick values. --quick trains
/// fewer steps on fewer examples.
inline speedlabs::Knobs<Config> knobs() {
  speedlabs::Knobs<Config> knobs;
  knobs
      .flag<std::string>(
          "--dtype", "autocast dtype for the dtype checks and the policy table",
          [](const Config& c) { return std::string(c.dtype == c10::kHalf ? "fp16" : "bf16"); },
          [](Config& c, const std::string& dtype) { c.dtype = dtype == "fp16" ? c10::kHalf : c10::kBFloat16; })
      .check(CLI::IsMember({"bf16", "fp16"}));
  knobs.flag("--steps", "training steps per run", &Config::steps).quick(60).check(CLI::Range(1, 100000));
  knobs.seed_flag(&Config::seed);
  knobs.setting(&Config::batch).quick(128);
  return knobs;
}

/// What --quick runs before any flag and before the device is chosen (the tests start from it).
inline Config quick_config() { return knobs().quick(); }

/// The learning rate of every optimizer the lab runs.
inline constexpr double kLearningRate = 3e-3;

/// The lab's regression task: inputs x (batch x 16) and targets y (batch x 1), on the config's device.
struct Data {
  torch::Tensor x;  ///< inputs
  torch::Tensor y;  ///< targets
};

/// The task's data, the same for every run of one seed.
/// @param config  batch, seed and device
/// @return        the data
Data make_data(const Config& config);

/// Throws UsageError when autocast on @p device cannot compute in @p dtype (measured, not assumed).
/// @param device  the device
/// @param dtype   kBFloat16 or kHalf
void require_autocast_dtype(const c10::Device& device, c10::ScalarType dtype);

/// Runs the whole lab and records autocast_linear_output_dtype, master_weights_dtype, grads_are_fp32,
/// policy_matches_chapter, policy_matches_libtorch_cpu_lists, unlisted_ops_keep_input_dtype,
/// fp16_grads_underflow_without_scaler,
/// scaler_preserves_small_grads, scaler_on_inf_step, scaler_grows_after_interval,
/// amp_matches_fp32, fp8_current_scaling_keeps_range and fp8_delayed_scaling_shares (fp8_scaling.h),
/// bf16_weights_losses, stochastic_rounding_tracks_fp32_loss and kahan_tracks_fp32_loss (bf16_weights.h).
/// @param config  the knobs
/// @param report  where the observations go
void run(const Config& config, speedlabs::Report& report);

}  // namespace lab03
