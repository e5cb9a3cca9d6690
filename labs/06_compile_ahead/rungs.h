/// @file labs/06_compile_ahead/rungs.h
/// @brief The ladder's rungs: their names, the shapes and results they share, the model each rung builds, the batches
/// every rung shares, and one rung's timed steps (eager rungs here, the CUDA-graph rung in cuda_graph_rung.cpp).
#pragma once
#include <c10/core/Device.h>
#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/contention.h"
#include "common/gpt.h"
#include "common/precision.h"
#include "common/timer.h"

namespace lab06 {

/// The rungs of the ladder; each keeps everything of the rungs before it.
enum class Rung {
  fp32,         ///< float32, "highest" matmul precision, the chapter's written-out attention, ForeachAdamW
  tf32,         ///< + float32 matmuls may use TF32 tensor cores ("high")
  bf16,         ///< + autocast to bfloat16 for the forward pass and the loss
  sdpa,         ///< + at::scaled_dot_product_attention (flash / cuDNN / memory-efficient kernels)
  vocab50304,   ///< + the vocabulary padded from 50,257 to 50,304 rows
  fused_adamw,  ///< + the fused AdamW kernel, step counts and learning rate on the device
  cuda_graph,   ///< + the whole training step captured once as a CUDA graph and replayed (CUDA only)
};

/// Every rung, bottom to top.
const std::vector<Rung>& all_rungs();
/// Their names, bottom to top (the choices of --top).
const std::vector<std::string>& all_rung_names();
/// "fp32", "tf32", "bf16", "sdpa", "vocab50304", "fused_adamw", "cuda_graph".
/// @param rung the rung
std::string to_string(Rung rung);
/// Parses a rung name; throws speedlabs::UsageError for anything else.
/// @param name the name, as to_string() writes it
Rung parse_rung(const std::string& name);

/// The smallest multiple of @p multiple that is at least @p vocab_size: GPT-2's 50,257 tokens padded to
/// a multiple of 128 give 50,304 (= 2^7 * 393), a width the matrix-multiply kernels tile without a ragged edge.
/// Throws speedlabs::UsageError when either argument is not positive.
/// @param vocab_size the real number of tokens
/// @param multiple   the tile width to round up to
int64_t padded_vocab_size(int64_t vocab_size, int64_t multiple);

/// A batch shape.
struct Shape {
  int64_t batch = 4;  ///< B
  int64_t seq = 128;  ///< T
  /// "4x128"
  std::string name() const;
};

/// What one rung (or one Python peer) measured at one shape.
struct RungResult {
  std::string name;                   ///< the rung's name, or the peer's ("python_eager_bf16", "python_compile_bf16")
  Shape shape;                        ///< the batch shape
  bool ran = false;                   ///< false: not applicable here (see reason)
  std::string reason;                 ///< why it did not run
  double first_step_ms = 0;           ///< the time until the first step in the rung's final form is done
  double median_ms = 0;               ///< median step time of the measured steps
  double tokens_per_s = 0;            ///< B*T / median step time
  double tflops = 0;                  ///< useful FLOP/s (FLOPs per token of the unpadded model) in 10^12
  double mfu = 0;                     ///< tflops / the measured bfloat16 matmul rate; NaN off a CUDA GPU (see mfu_of)
  std::optional<int64_t> peak_bytes;  ///< peak device memory allocated (nullopt on the CPU)
  std::vector<double> losses;         ///< every step's loss, warm-up steps included
  std::string detail;                 ///< e.g. the attention backend that ran
  speedlabs::Summary step_ms;         ///< the measured steps' times (median, quartiles, spread), in milliseconds
  speedlabs::Contention contention;   ///< how busy the machine was while it ran (a peer: its whole script)
};

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
  int warmup;                                     ///< steps run before the measured ones
  int steps;                                      ///< measured steps
  double lr;                                      ///< AdamW learning rate
  const c10::Device& device;                      ///< where every rung trains
  const speedlabs::gpt::GPTConfig& model_config;  ///< the unpadded model
  const speedlabs::gpt::NamedTensors& weights;    ///< initial_weights()
  const Batches& batches;                         ///< load_batches()
  double useful_flops_per_step = 0;               ///< flops_per_token() x B x T
  double bf16_tflops = 0;                         ///< the measured peak, for the MFU

  /// Warm-up plus measured steps.
  int total_steps() const { return warmup + steps; }

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
