/// @file labs/13_speedrun/exercise.h
/// @brief Lab 13 exercise: your trainer for the speedrun. The lab hands it the training stream and a model
/// size, calls step() against the clock, and judges only the weights it hands back.
///
/// The stub in labs/13_speedrun/exercise.cpp is the lab's baseline itself (recipe.h: nanoGPT's CPU recipe), so a
/// fresh clone runs and scores about 1. Make it faster with what labs 03 to 12 taught. Check your work with
/// `./lab check 13`; race it with `./lab speedrun`.
#pragma once
#include <torch/types.h>
#include <torch/utils.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/gpt_config.h"
#include "common/tensor_file.h"

namespace lab13 {

/// The baseline's recipe: nanoGPT's for a laptop CPU (its README's command line and
/// config/train_shakespeare_char.py), on the common GPT. A trainer is handed it and may use its own.
struct Recipe {
  int64_t batch = 12;         ///< B: sequences a step (--batch)
  int64_t seq = 64;           ///< T: characters a sequence (--seq, at most the model's context)
  double lr = 1e-3;           ///< AdamW's peak learning rate (--lr)
  double min_lr = 1e-4;       ///< the floor the cosine decays to
  int warmup_steps = 100;     ///< linear warm-up from lr / (warmup + 1)
  int decay_steps = 2000;     ///< the cosine reaches min_lr here and stays (nanoGPT's lr_decay_iters)
  double beta1 = 0.9;         ///< AdamW's first-moment decay
  double beta2 = 0.99;        ///< AdamW's second-moment decay (0.99 for a small dataset, as nanoGPT's config)
  double weight_decay = 0.1;  ///< on the matrices only (embeddings included), not on biases and norms
  double grad_clip = 1.0;     ///< the gradient's norm is clipped to this before every step
};

/// What a trainer is given. The validation characters are not in it, nor anywhere the trainer is handed.
struct TrainerConfig {
  /// The model: the common GPT (common/gpt.h) of this size. The evaluator loads weights() into a float32 GPT of
  /// exactly this size, so a trainer trains this architecture, whatever precision it computes in.
  speedlabs::gpt::GPTConfig model;
  Recipe recipe;       ///< the baseline's batch, sequence length, optimizer and schedule
  uint64_t seed = 42;  ///< seed the initial weights with it (torch::manual_seed before building the model)
  int max_steps = 0;   ///< the step cap: step() is called at most this often
  /// The training stream: tiny shakespeare's characters (ids 0 to 64) without the validation split.
  std::shared_ptr<const std::vector<int32_t>> train_tokens;
  /// Techniques (names from Trainer::techniques()) to leave off in this run: the lab's ablation turns each
  /// off in turn to measure its share of the speed-up. A trainer honours the names it lists.
  std::set<std::string> disabled;
};

/// A trainer in the speedrun. Everything it does between init() and its last step(), weights() included, is
/// timed; the lab's validation between steps is not.
class Trainer {
 public:
  virtual ~Trainer() = default;
  /// Builds the model (seeded with config.seed), its optimizer and its data loading. Timed.
  virtual void init(const TrainerConfig& config) = 0;
  /// One optimizer step on the next batch of the training stream. Timed.
  virtual void step() = 0;
  /// The model's weights as float32 tensors on the CPU, named as speedlabs::gpt::GPT's named_parameters()
  /// (every one of them, the tied lm_head included in transformer.wte.weight). Timed.
  virtual speedlabs::gpt::NamedTensors weights() = 0;
  /// B of the step just taken, when the trainer picks its own (it may change from step to step); 0:
  /// the recipe's. The tokens/s and the MFU count each step's B x T.
  virtual int64_t batch() const { return 0; }
  /// The techniques this trainer uses that TrainerConfig::disabled can turn off, e.g. {"bf16", "fused_attention"}.
  virtual std::vector<std::string> techniques() const { return {}; }
};

/// Your trainer: the one the lab races against its baseline.
std::unique_ptr<Trainer> make_trainer();

}  // namespace lab13
