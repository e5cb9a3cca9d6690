/// @file labs/05_gpt2/src/training.h
/// @brief Lab 05's training loop: every precision mode trained side by side, step by step (round-robin),
/// logged, timed, interruptible.
#pragma once
#include <string>
#include <vector>

#include "common/files.h"
#include "common/gpt.h"
#include "common/progress.h"
#include "experiment.h"

namespace lab05 {

/// The memory a run needs at once, from its sizes alone (before anything is allocated): a lower estimate,
/// every term counting only what must be there, so a run it refuses cannot fit.
struct MemoryEstimate {
  /// (12 x modes + 4) x parameters bytes: every mode keeps its float32 weights and AdamW's two moments
  /// between its steps; the mode that steps adds its float32 gradients.
  double training_state = 0;
  /// n_layer x B x T x (16 x n_embd + 2 x n_head x T) values: what each block keeps for the backward pass
  /// (layer norms, q, k, v, the attention's output, the MLP's 4 x n_embd hidden and its GELU) and the
  /// attention scores with their softmax; 4 bytes a value (2 when every mode computes in 16 bits).
  double activations = 0;
  /// 2 x B x T x vocab x 4 bytes: the cross-entropy's log-softmax and its gradient, float32 under autocast too.
  double logits = 0;
  /// The sum.
  double total() const { return training_state + activations + logits; }
};

/// The estimate of a run of @p config (doubles: a huge --batch cannot overflow it).
MemoryEstimate estimate_memory(const Config& config);

/// Throws speedlabs::UsageError (exit 2), showing the estimate and the memory @p device has, when the
/// estimate is above all of it: a run that cannot fit is refused before it starts, not killed by the
/// kernel tens of gigabytes later. Does nothing where the device's memory cannot be read.
void require_memory_fits(const Config& config, const c10::Device& device);

/// What every mode's loop shares.
struct TrainingRun {
  const Config& config;                          ///< steps, batch, seed, learning rate, logging
  const c10::Device& device;                     ///< where to train
  const speedlabs::gpt::GPTConfig model_config;  ///< the model's shape
  const std::vector<int32_t>& tokens;            ///< the dataset
  speedlabs::CsvLog& csv;                        ///< every step's line
  speedlabs::ProgressBar& bar;                   ///< the progress bar (stderr, a terminal only)
};

/// True when @p step is printed (every config.log_every steps and the last): the loss curves compare those.
bool logged(int step, const Config& config);

/// Trains every mode of @p modes from the seed's initial weights on the dataset's first batches (the same
/// weights and batches in every mode), round-robin: step s of every mode, then step s + 1, the order of the
/// modes reversed every other step. Each mode keeps its own model, optimizer, scaler and loader, so all of
/// them are in memory at once; the step times of different modes taken at the same step saw the same
/// moment of the machine, and their ratios are per-step pairs. Throws speedlabs::RuntimeFailure on a
/// non-finite loss (fp32, tf32, bf16), on eight non-finite fp16 losses in a row, and when Ctrl-C or SIGTERM
/// asks to stop (between two steps).
/// @return each mode's result, in the order of @p modes; contention is left for the caller to fill
std::vector<ModeResult> train_modes(const TrainingRun& run, const std::vector<speedlabs::Precision>& modes);

}  // namespace lab05
