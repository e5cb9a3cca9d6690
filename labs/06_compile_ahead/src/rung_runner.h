/// @file labs/06_compile_ahead/src/rung_runner.h
/// @brief What trains the ladder's rungs: the batches and initial weights every rung shares, the model each rung
/// builds, and one rung's timed steps (eager rungs in rungs.cpp, the CUDA-graph rung in cuda_graph_rung.cpp).
#pragma once
#include <c10/core/Device.h>
#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "common/gpt.h"
#include "rungs.h"

namespace lab06 {

/// The steps' batches, staged on the device before timing so that every rung and peer sees the same ones.
struct Batches {
  std::vector<torch::Tensor> x;  ///< one (B, T) batch of input ids per step
  std::vector<torch::Tensor> y;  ///< its targets
};

/// The first @p count batches of @p ids at @p shape, on @p device.
Batches load_batches(const std::vector<int32_t>& ids, const Shape& shape, int count, const c10::Device& device);

/// The initial weights of the unpadded model, by name, on the CPU: every rung and peer starts from them.
speedlabs::gpt::NamedTensors initial_weights(const speedlabs::gpt::GPTConfig& model_config, uint64_t seed);

/// One shape's rungs: each builds its model from the shared weights, trains on the shared batches and is
/// timed step by step through common/timer. Ctrl-C or SIGTERM stops it between two steps.
struct RungRunner {
  int warmup;                                     ///< steps run before the measured ones
  int steps;                                      ///< measured steps
  double lr;                                      ///< AdamW learning rate
  const c10::Device& device;                      ///< where every rung trains
  const speedlabs::gpt::GPTConfig& model_config;  ///< the unpadded model
  const speedlabs::gpt::NamedTensors& weights;    ///< initial_weights()
  const Batches& batches;                         ///< load_batches()
  double useful_flops_per_step = 0;               ///< flops_per_token() x B x T
  MfuPeaks peaks;                                 ///< the peaks, for the MFUs

  /// Warm-up plus measured steps.
  int total_steps() const { return warmup + steps; }

  /// A model for @p rung holding the initial weights (the padded vocabulary's extra rows start at zero).
  speedlabs::gpt::GPT build_model(Rung rung) const;

  /// Fills @p result's timing fields and MFUs from per-step @p times; @p fast_from is the first step in the rung's
  /// final form.
  void summarize_times(Rung rung, RungResult& result, const std::vector<double>& times, int fast_from) const;

  /// An eager rung (every rung but cuda_graph): lab 05's train_step, step after step.
  RungResult eager(Rung rung, const Shape& shape) const;

  /// The cuda_graph rung: a few eager steps, one capture, then replays (not run off a CUDA GPU, with the reason).
  RungResult cuda_graph(const Shape& shape) const;
};

}  // namespace lab06
