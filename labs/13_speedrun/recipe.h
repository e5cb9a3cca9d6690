/// @file labs/13_speedrun/recipe.h
/// @brief The baseline's recipe as a trainer to build on: nanoGPT's CPU recipe on the common GPT. The lab races
/// it as the baseline, the Python peer runs it in PyTorch, and your trainer (exercise.cpp) starts as it and
/// overrides the parts it makes faster.
#pragma once
#include <torch/types.h>

#include <memory>

#include "common/gpt.h"
#include "datasets/data_loader.h"  // datasets::Batch
#include "exercise.h"

namespace lab13 {

/// Attention as lab 05 writes it: the whole (T, T) score matrix, masked, softmaxed (the baseline's).
/// q, k, v: (B, heads, T, head size); returns the same shape.
torch::Tensor written_out_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

/// Every parameter of @p model, detached, named as its named_parameters(): what Trainer::weights() hands back.
speedlabs::gpt::NamedTensors weights_of(const speedlabs::gpt::GPT& model);

/// nanoGPT's learning rate at @p step (from 0): a linear warm-up over recipe.warmup_steps, a cosine from
/// recipe.lr down to recipe.min_lr at recipe.decay_steps, then recipe.min_lr.
double recipe_learning_rate(const Recipe& recipe, int step);

/// nanoGPT's get_batch, drawn ahead: where each window of each of @p steps batches starts, uniform over the
/// stream of @p stream_size ids so that T + 1 of them fit, from a generator of its own seeded with @p seed.
/// The same seed gives the same windows, so the baseline and its Python peer train on the same batches.
/// @return (steps, batch) int64
torch::Tensor window_offsets(uint64_t seed, int steps, int64_t batch, int64_t stream_size, int64_t seq);

/// The recipe's trainer: a float32 GPT with the attention written out, AdamW with weight decay on the matrices,
/// the gradient's norm clipped, the schedule above, each batch B random windows (window_offsets()). Each part
/// is a function a trainer derived from it may replace.
class RecipeTrainer : public Trainer {
 public:
  void init(const TrainerConfig& config) override;
  void step() override;
  speedlabs::gpt::NamedTensors weights() override;
  int64_t batch() const override { return batch_size(); }

 protected:
  /// B of every step (the recipe's).
  virtual int64_t batch_size() const { return config_.recipe.batch; }
  /// The attention the model is built with (written out).
  virtual speedlabs::gpt::AttentionFn attention() const { return written_out_attention; }
  /// The optimizer over the model's parameters (AdamW, weight decay on the matrices only).
  virtual void make_optimizer();
  /// The loss of one batch: the forward pass.
  virtual torch::Tensor loss_of(const datasets::Batch& batch);
  /// The batch of step @p step: batch_size() windows of recipe.seq ids and their next ids.
  datasets::Batch batch_at(int step) const;
  /// After backward(): clips the gradient's norm, steps the optimizer at the schedule's rate, zeroes the grads.
  virtual void update(int step);

  TrainerConfig config_;                        ///< what init() was given
  std::unique_ptr<speedlabs::gpt::GPT> model_;  ///< the model, float32
  std::unique_ptr<torch::optim::AdamW> adamw_;  ///< make_optimizer()'s AdamW
  torch::Tensor stream_;                        ///< the training stream, int64
  torch::Tensor offsets_;                       ///< window_offsets() for every step of max_steps
  int steps_ = 0;                               ///< steps taken
};

/// The lab's baseline: the recipe's trainer as it is.
std::unique_ptr<Trainer> make_baseline_trainer();

}  // namespace lab13
