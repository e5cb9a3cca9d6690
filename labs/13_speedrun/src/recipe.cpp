// The baseline's recipe (recipe.h): nanoGPT's CPU recipe on the common GPT.
#include "recipe.h"

#include <cmath>
#include <limits>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>

namespace lab13 {

namespace gpt = speedlabs::gpt;

torch::Tensor written_out_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t T = q.size(-2);
  auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  const auto future = torch::ones({T, T}, q.options().dtype(torch::kBool)).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v);
}

gpt::NamedTensors weights_of(const gpt::GPT& model) {
  gpt::NamedTensors named;
  for (const auto& p : model->named_parameters()) named.emplace_back(p.key(), p.value().detach());
  return named;
}

double recipe_learning_rate(const Recipe& r, int step) {
  if (step < r.warmup_steps) return r.lr * (step + 1) / (r.warmup_steps + 1);
  if (step > r.decay_steps) return r.min_lr;
  const double ratio = static_cast<double>(step - r.warmup_steps) / std::max(r.decay_steps - r.warmup_steps, 1);
  return r.min_lr + 0.5 * (1.0 + std::cos(M_PI * ratio)) * (r.lr - r.min_lr);
}

torch::Tensor window_offsets(uint64_t seed, int steps, int64_t batch, int64_t stream_size, int64_t seq) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randint(stream_size - seq, {steps, batch}, generator, torch::kLong);
}

void RecipeTrainer::init(const TrainerConfig& config) {
  config_ = config;
  torch::manual_seed(config.seed);
  model_ = std::make_unique<gpt::GPT>(config.model, attention());
  make_optimizer();
  stream_ = torch::tensor(*config.train_tokens, torch::kLong);
  offsets_ =
      window_offsets(config.seed, std::max(config.max_steps, 1), batch_size(), stream_.numel(), config.recipe.seq);
}

datasets::Batch RecipeTrainer::batch_at(int step) const {
  const torch::Tensor starts = offsets_[step % offsets_.size(0)].unsqueeze(1);                    // (B, 1)
  const torch::Tensor windows = stream_.index({starts + torch::arange(config_.recipe.seq + 1)});  // (B, T + 1)
  return {windows.narrow(1, 0, config_.recipe.seq).contiguous(), windows.narrow(1, 1, config_.recipe.seq).contiguous()};
}

void RecipeTrainer::make_optimizer() {
  const Recipe& r = config_.recipe;
  std::vector<torch::Tensor> decayed, kept;
  for (const auto& p : (*model_)->parameters()) (p.dim() >= 2 ? decayed : kept).push_back(p);
  const auto options = [&r](double weight_decay) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(r.lr).betas({r.beta1, r.beta2}).eps(1e-8).weight_decay(weight_decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decayed, options(r.weight_decay));
  groups.emplace_back(kept, options(0.0));
  adamw_ = std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(r.lr));
}

torch::Tensor RecipeTrainer::loss_of(const datasets::Batch& batch) { return (*model_)->forward(batch.x, batch.y).loss; }

void RecipeTrainer::update(int step) {
  torch::nn::utils::clip_grad_norm_((*model_)->parameters(), config_.recipe.grad_clip);
  const double lr = recipe_learning_rate(config_.recipe, step);
  for (auto& group : adamw_->param_groups()) group.options().set_lr(lr);
  adamw_->step();
  adamw_->zero_grad();
}

void RecipeTrainer::step() {
  const datasets::Batch batch = batch_at(steps_);
  loss_of(batch).backward();
  update(steps_++);
}

gpt::NamedTensors RecipeTrainer::weights() { return weights_of(*model_); }

std::unique_ptr<Trainer> make_baseline_trainer() { return std::make_unique<RecipeTrainer>(); }

}  // namespace lab13
