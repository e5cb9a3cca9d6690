/// @file labs/08_memory/src/experiment.h
/// @brief Lab 08: where the memory of a training step goes (weights, gradients, AdamW state, activations),
/// predicted by formulas and measured by the allocator, in float32 and bf16 autocast, with and without
/// activation checkpointing, and the largest batch that fits a memory budget.
#pragma once
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/cli.h"
#include "common/observations.h"

namespace lab08 {

/// What the lab runs.
struct Config {
  std::string model = "tiny";                        ///< "tiny" or "gpt2" (common/gpt.h)
  int64_t batch = 4;                                 ///< B of the phase-by-phase step
  int64_t seq = 128;                                 ///< T of the phase-by-phase step (at most the model's block size)
  std::vector<int64_t> checkpoint_seqs = {64, 128};  ///< the two sequence lengths of the checkpointing part
  double budget_mb = 512;                            ///< --budget-mb: the memory the largest batch must fit in (MiB)
  int warmup = 1;                                    ///< timed steps discarded before measuring
  int repeats = 5;                                   ///< timed steps measured (the median is reported)
  std::string results_dir;                           ///< where the phases' data and the SVG plot go ("" for none)
};

/// The lab's knobs, each once: its flags with their defaults (Config) and --quick values.
inline speedlabs::Knobs<Config> knobs() {
  speedlabs::Knobs<Config> knobs;
  knobs.model_flag(&Config::model);
  knobs.flag("--batch", "B of the measured step", &Config::batch).quick(2).check(speedlabs::at_least(int64_t{1}));
  knobs.flag("--seq", "T of the measured step (checkpointing also runs T/2)", &Config::seq)
      .quick(32)
      .check(speedlabs::at_least(int64_t{1}));
  knobs.flag("--budget-mb", "memory budget for the largest batch, MiB", &Config::budget_mb)
      .quick(160)
      .check(speedlabs::finite_above());
  knobs.flag("--warmup", "timed steps discarded first", &Config::warmup).check(speedlabs::at_least(0));
  knobs.flag("--repeats", "timed steps measured", &Config::repeats).quick(3).check(speedlabs::at_least(1));
  knobs.flag("--results", "write memory_phases.dat, memory_phases.gp and memory_phases.svg (gnuplot) here",
             &Config::results_dir);
  return knobs;
}

/// The sequence lengths of the checkpointing part of a run at T = @p seq: T/2 and T (T alone for T = 1).
inline std::vector<int64_t> checkpoint_seqs_for(int64_t seq) {
  return seq > 1 ? std::vector<int64_t>{seq / 2, seq} : std::vector<int64_t>{seq};
}

/// What --quick runs before any flag, checkpointing at its T/2 and T (the tests start from it).
inline Config quick_config() {
  Config config = knobs().quick();
  config.checkpoint_seqs = checkpoint_seqs_for(config.seq);
  return config;
}

/// The sizes the formulas need: from the model's config, N counted from its parameters.
struct ModelShape {
  int64_t params = 0;         ///< N, distinct parameters (the tied lm_head counted once)
  int64_t tensors = 0;        ///< how many parameter tensors (for the GPU allocator's per-tensor rounding)
  int64_t largest_param = 0;  ///< elements of the largest parameter (the token embedding)
  int64_t matmul_params = 0;  ///< elements of the weights and biases that feed matmuls (all but wpe and LayerNorms)
  int64_t n_layer = 0;        ///< transformer blocks
  int64_t n_head = 0;         ///< attention heads
  int64_t n_embd = 0;         ///< C, the width of the residual stream
  int64_t vocab = 0;          ///< V
};

/// The shape of config @p model ("tiny" or "gpt2"), N counted from a model built on the CPU.
/// @param model the config's name (UsageError for another)
ModelShape model_shape(const std::string& model);

/// Bytes of the float32 weights: 4 N.
int64_t weights_bytes_formula(const ModelShape& shape);
/// Bytes of the float32 gradients, one per weight: 4 N.
int64_t grads_bytes_formula(const ModelShape& shape);
/// Bytes of AdamW's state, two float32 moments per weight (exp_avg, exp_avg_sq): 8 N.
int64_t adamw_state_bytes_formula(const ModelShape& shape);

/// Bytes a float32 step keeps from its forward for its backward, from the layer shapes (README.md,
/// "The step, phase by phase"). Per block: 19 tensors of (B, T, C) floats and one (B, n_head, T, T)
/// attention matrix; after the blocks: the final LayerNorm's input and output, 2 (B, T, C), and the
/// log-probabilities of the loss, (B, T, V). With checkpointing each block keeps only its input,
/// 1 (B, T, C). Small tensors (LayerNorm statistics, the causal mask) are left out: the measured bytes
/// may exceed this by a few percent.
/// @param shape      the model
/// @param batch      B
/// @param seq        T
/// @param checkpoint whether every block is checkpointed
int64_t activations_bytes_formula(const ModelShape& shape, int64_t batch, int64_t seq, bool checkpoint);

/// The peak a steady float32 training step (AdamW state already there) is predicted to reach:
/// weights, gradients and AdamW state (16 N), the saved activations, and the two (B, T, V) gradients
/// the loss's backward makes while the log-probabilities are still alive; or, where that is more,
/// AdamW's update, which makes two temporaries the size of the largest parameter. An upper bound: the
/// gradients are not all there while the logits are.
/// @param shape      the model
/// @param batch      B
/// @param seq        T
/// @param checkpoint whether every block is checkpointed
int64_t step_peak_bytes_formula(const ModelShape& shape, int64_t batch, int64_t seq, bool checkpoint);

/// The largest B whose predicted step peak (step_peak_bytes_formula) fits in @p budget_bytes; 0 when
/// not even B = 1 fits.
/// @param shape        the model
/// @param seq          T
/// @param checkpoint   whether every block is checkpointed
/// @param budget_bytes the budget
int64_t largest_batch_formula(const ModelShape& shape, int64_t seq, bool checkpoint, int64_t budget_bytes);

/// One row of the training-memory table for a model of N parameters (it extends lab 02's weights-only
/// figure: 7B parameters are 28 GB in float32, 14 GB in 16 bits).
struct TrainingMemoryRow {
  std::string recipe;          ///< how the model is trained
  double weight_bytes = 0;     ///< bytes per parameter of the weights the forward reads
  double master_bytes = 0;     ///< bytes per parameter of float32 master weights kept beside them
  double grad_bytes = 0;       ///< bytes per parameter of the gradients
  double optimizer_bytes = 0;  ///< bytes per parameter of AdamW's two moments
  /// Bytes per parameter in all.
  double per_param() const { return weight_bytes + master_bytes + grad_bytes + optimizer_bytes; }
};

/// The rows: float32 with AdamW (16 B/param), bf16 autocast as this lab runs it (float32 everything,
/// 16 B/param, plus the bf16 weight copies autocast casts during the step), mixed precision with
/// float32 master weights (2 + 4 + 2 + 8 = 16 B/param) and everything in bf16 (8 B/param).
std::vector<TrainingMemoryRow> training_memory_table();

/// Bytes of the tensors a step holds at each phase, measured by the allocator, relative to the bytes
/// live before the model was built.
struct PhaseBytes {
  int64_t weights = 0;              ///< after building the model
  int64_t after_forward = 0;        ///< after the forward and the loss: weights + saved activations
  int64_t backward_peak = 0;        ///< the most during backward
  int64_t after_backward = 0;       ///< after backward: weights + gradients (activations freed)
  int64_t after_step = 0;           ///< after the first AdamW step: + the two moments
  int64_t step_peak = 0;            ///< the most during that AdamW step
  std::optional<int64_t> reserved;  ///< on a GPU: bytes the caching allocator holds from the driver at the end
  double loss = 0;                  ///< the step's loss

  /// The saved activations: after_forward - weights.
  int64_t activations() const { return after_forward - weights; }
  /// The gradients: after_backward - weights.
  int64_t grads() const { return after_backward - weights; }
  /// AdamW's state: after_step - after_backward.
  int64_t adamw_state() const { return after_step - after_backward; }
};

/// How one measured step runs.
struct StepSetup {
  int64_t batch = 4;                        ///< B
  int64_t seq = 128;                        ///< T
  std::optional<c10::ScalarType> autocast;  ///< the forward under autocast to this dtype; nullopt: float32
  bool checkpoint = false;                  ///< every block through checkpointed_block()
};

/// Builds the model (seeded, so every call builds the same weights) and an AdamW, and measures the
/// first training step on random tokens phase by phase. On the CPU the counting allocator of
/// common/host_memory.h measures; on a CUDA GPU the caching allocator's statistics.
/// @param model  "tiny" or "gpt2"
/// @param setup  the step
/// @param device cpu or cuda (UsageError for another)
PhaseBytes measure_phases(const std::string& model, const StepSetup& setup, const c10::Device& device);

/// The peak bytes of a steady training step (the second step, AdamW's state already there), relative to
/// the bytes live before the model was built.
/// @param model  "tiny" or "gpt2"
/// @param setup  the step (float32 or autocast, with or without checkpointing)
/// @param device cpu or cuda
int64_t measure_steady_step_peak(const std::string& model, const StepSetup& setup, const c10::Device& device);

/// The plain and the checkpointed step compared on the same weights and tokens.
struct CheckpointParity {
  double plain_loss = 0;          ///< the plain step's loss
  double checkpointed_loss = 0;   ///< the checkpointed step's loss
  double max_grad_abs_error = 0;  ///< largest |difference| over every gradient element
  double max_grad_abs = 0;        ///< largest |gradient| of the plain step (the scale of the error)
};

/// Runs one float32 forward and backward with and without checkpointing from the same seeded weights
/// and tokens, and compares the losses and every gradient.
/// @param model  "tiny" or "gpt2"
/// @param batch  B
/// @param seq    T
/// @param device the device
CheckpointParity compare_checkpointed_step(const std::string& model, int64_t batch, int64_t seq,
                                           const c10::Device& device);

/// Writes memory_phases.dat, memory_phases.gp and (with gnuplot installed) memory_phases.svg to
/// @p dir: live bytes over the phases of one step, one line per run.
/// @param dir    the folder (created)
/// @param runs   (name, phases) for each line of the plot
/// @return a line saying what was written, or why there is no SVG
std::string write_phase_plot(const std::string& dir, const std::vector<std::pair<std::string, PhaseBytes>>& runs);

/// The whole lab: checks the budget (UsageError when not even B = 1 fits with checkpointing) and the batch
/// (UsageError when its float32 step is predicted not to fit the device's memory), then
/// the phases, precision, checkpointing and largest-batch parts, printing tables and recording the
/// observations.
/// @param config what to run
/// @param device cpu or cuda
/// @param report where the observations go
void run(const Config& config, const c10::Device& device, speedlabs::Report& report);

}  // namespace lab08
