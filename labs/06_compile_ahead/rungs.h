/// @file labs/06_compile_ahead/rungs.h
/// @brief The ladder's rungs: the model each rung builds, the batches every rung shares, and one rung's
/// timed steps (eager rungs here, the CUDA-graph rung in cuda_graph_rung.cpp).
#pragma once
#include <string>
#include <vector>

#include "common/gpt.h"
#include "common/precision.h"
#include "experiment.h"

namespace lab06 {

/// GPT-2's real vocabulary is padded up to a multiple of this tile width by the vocab50304 rung (50,304 = 128 * 393).
inline constexpr int64_t kVocabTile = 128;

/// True when @p rung is @p step or above it: each rung keeps everything of the rungs below.
bool at_least(Rung rung, Rung step);

/// The precision mode of lab 05's training step that a rung runs in: from bf16 up every rung is bf16.
speedlabs::Precision rung_precision(Rung rung);

/// The precision a rung is compared in with the Python eager peers ("" from sdpa up: those rungs have no peer).
std::string peer_mode(Rung rung);

/// The steps' batches, staged on the device before timing so that every rung and peer sees the same ones.
struct Batches {
  std::vector<torch::Tensor> x;  ///< one (B, T) batch of input ids per step
  std::vector<torch::Tensor> y;  ///< its targets
};

/// The first @p count batches of @p ids at @p shape, on @p device.
Batches load_batches(const std::vector<int32_t>& ids, const Shape& shape, int count, const c10::Device& device);

/// The initial weights of the unpadded model, by name, on the CPU: every rung and peer starts from them.
speedlabs::gpt::NamedTensors initial_weights(const speedlabs::gpt::GPTConfig& model_config, uint64_t seed);

/// Model FLOPs utilisation: useful FLOP/s over the measured bf16 matmul peak. Only on a CUDA GPU: there the
/// rungs that matter run bf16 on the tensor cores the peak measures; a CPU's fp32 rungs against its bf16
/// peak gave 140% (a ratio to a peak of another dtype says nothing), so elsewhere it is NaN ("n/a").
double mfu_of(double tflops, double bf16_peak_tflops, const c10::Device& device);

/// A rate readable on a CPU (tens of GFLOP/s) and on a GPU (hundreds of TFLOP/s).
std::string flops_rate(double tflops);

/// One shape's rungs: each builds its model from the shared weights, trains on the shared batches and is
/// timed step by step through common/timer. Ctrl-C or SIGTERM stops it between two steps.
struct RungRunner {
  const Config& config;                                ///< warm-up, steps, learning rate
  const c10::Device& device;                           ///< where every rung trains
  const speedlabs::gpt::GPTConfig& model_config;       ///< the unpadded model
  const speedlabs::gpt::NamedTensors& weights;         ///< initial_weights()
  const Batches& batches;                              ///< load_batches()
  double useful_flops_per_step;                        ///< flops_per_token() x B x T
  double bf16_tflops;                                  ///< the measured peak, for the MFU

  /// Warm-up plus measured steps.
  int total_steps() const { return config.warmup + config.steps; }

  /// A model for @p rung holding the initial weights (the padded vocabulary's extra rows start at zero).
  speedlabs::gpt::GPT build_model(Rung rung) const;

  /// Fills @p result's timing fields from per-step @p times; @p fast_from is the first step in the rung's final form.
  void summarize_times(RungResult& result, const std::vector<double>& times, int fast_from) const;

  /// An eager rung (every rung but cuda_graph): lab 05's train_step, step after step.
  RungResult eager(Rung rung, const Shape& shape) const;

  /// The cuda_graph rung: a few eager steps, one capture, then replays (not run off a CUDA GPU, with the reason).
  RungResult cuda_graph(const Shape& shape) const;
};

}  // namespace lab06
