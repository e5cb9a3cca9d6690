/// @file labs/03_mixed_precision/experiment.h
/// @brief Lab 03: autocast's per-op policy measured, loss scaling shown, and mixed-precision training
/// compared with float32.
#pragma once
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/observations.h"

namespace lab03 {

/// The experiment's knobs.
struct Config {
  c10::Device device{c10::kCPU};          ///< where everything runs
  c10::ScalarType dtype = c10::kBFloat16; ///< the autocast dtype of the dtype checks and the policy table
  int steps = 200;                        ///< training steps of each run (fp32, fp16 + scaler, bf16)
  int64_t batch = 256;                    ///< training examples (one full batch per step)
  int64_t hidden = 64;                    ///< width of the MLP's hidden layers
  uint64_t seed = 0;                      ///< data and initial weights
};

/// The settings --quick uses: 60 steps on 128 examples.
/// @param device  the device to run on
Config quick_config(const c10::Device& device);

/// Throws UsageError when autocast on @p device cannot compute in @p dtype (measured, not assumed).
/// @param device  the device
/// @param dtype   kBFloat16 or kHalf
void require_autocast_dtype(const c10::Device& device, c10::ScalarType dtype);

/// One op of chapter 9 section 5, run under autocast.
struct PolicyRow {
  std::string op;                ///< the chapter's name, e.g. "linear", "__rpow__", "GRUCell"
  std::string call;              ///< the C++ call that ran it
  std::string chapter_policy;    ///< "lower", "float32" or "widest": the chapter's list
  std::string fp32_in;           ///< output dtype with float32 inputs
  std::string low_in;            ///< output dtype with low-precision inputs ("error": no kernel for them)
  std::string mixed_in;          ///< output dtype with one float32 input and the others low ("" if not probed)
  std::string measured_policy;   ///< "lower", "float32", "widest" or "inputs" (autocast left the dtype alone)
  std::string cpu_rule;          ///< the aten op whose AutocastCPU registration decides ("" none)
  std::string cpu_policy;        ///< the policy libtorch's CPU lists give it: lower, float32, widest or inputs
  bool matches_chapter = false;  ///< the measurement agrees with the chapter
  bool matches_cpu_lists = false;///< the measurement agrees with libtorch's CPU lists
  std::string note;              ///< how the C++ call relates to the Python name, or why CPU differs
};

/// Runs every op of the chapter's three lists under autocast(device, dtype) with float32, low-precision
/// and (for the promote list) mixed inputs, and classifies what happened.
/// @param device  the device
/// @param dtype   the autocast dtype
std::vector<PolicyRow> measure_policy(const c10::Device& device, c10::ScalarType dtype);

/// The entries of libtorch's AutocastCPU lists (aten/src/ATen/autocast_mode.cpp) and whether this
/// libtorch binary really registers an AutocastCPU kernel for each.
struct CpuListCheck {
  int entries = 0;                      ///< list entries
  int registered = 0;                   ///< of those, registered in this binary
  std::vector<std::string> unregistered;///< entries without a kernel here
};

/// Asks the dispatcher about every entry of the embedded CPU lists.
CpuListCheck check_cpu_lists_against_dispatcher();

/// True when this libtorch registers an AutocastCPU kernel for @p op ("name" or "name.overload").
/// @param op  an aten operator name without the "aten::" prefix
bool has_autocast_cpu_kernel(const std::string& op);

/// Runs the whole lab and records autocast_linear_output_dtype, weights_stay_fp32, grads_are_fp32,
/// policy_matches_chapter, policy_matches_libtorch_cpu_lists, fp16_grads_underflow_without_scaler,
/// scaler_preserves_small_grads, scaler_skips_inf_step_and_backs_off, scaler_grows_after_interval and
/// amp_matches_fp32.
/// @param config  the knobs
/// @param report  where the observations go
void run(const Config& config, speedlabs::Report& report);

}  // namespace lab03
