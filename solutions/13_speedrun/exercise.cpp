// Lab 13 reference solution: the course's fastest CPU trainer for the speedrun, built on the baseline's recipe
// (recipe.h). Three techniques, each of which can be turned off by name (TrainerConfig::disabled) for the lab's
// ablation; the full race's record gives each one's slowdown when off. The attention stays written out (README.md,
// "Attention stays written out in the reference").
#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_norm.h>
#include <ATen/ops/_foreach_zero.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>

#include "common/autocast_guard.h"
#include "common/gpt.h"
#include "common/peaks.h"
#include "exercise.h"
#include "recipe.h"

namespace lab13 {

namespace gpt = speedlabs::gpt;

namespace {

// The larger batch and its schedule: B=32, a short warm-up, a linear decay to a floor.
constexpr int64_t kBatch = 32;
constexpr int kWarmupSteps = 20;
constexpr int kDecayEnd = 230;       // the decay reaches the floor here, and stays
constexpr double kFloor = 0.05;      // of the peak
constexpr double kAdamwPeak = 3e-3;  // embeddings, biases, norms (and every weight when Muon is off)
// Muon (Keller Jordan's, as the modded-nanogpt speedrun records use it) for the blocks' matrices.
constexpr double kMuonPeak = 0.05;
constexpr double kMuonMomentum = 0.8;
constexpr int kNewtonSchulzSteps = 5;

// labs 03 and 05: bf16 pays where the CPU multiplies bf16 pairs in hardware.
bool cpu_multiplies_bf16() {
  std::istringstream flags(speedlabs::describe_this_cpu().flags);
  for (std::string flag; flags >> flag;) {
    if (flag == "avx512_bf16" || flag == "amx_bf16") return true;
  }
  return false;
}

// The orthogonal matrices nearest the directions of @p g, approximately: Muon's quintic Newton-Schulz iteration.
// g: (n, rows, cols) with rows <= cols; returns the same shape, each matrix's singular values pushed towards 1.
torch::Tensor orthogonalised(const torch::Tensor& g) {
  torch::Tensor x = g / (g.norm(2, {1, 2}, true) + 1e-7);
  for (int i = 0; i < kNewtonSchulzSteps; ++i) {
    const torch::Tensor a = x.bmm(x.transpose(1, 2));                  // (n, rows, rows)
    const torch::Tensor b = torch::baddbmm(a, a, a, -4.7750, 2.0315);  // -4.775 a + 2.0315 a a
    x = torch::baddbmm(x, b, x, 3.4445, 1.0);                          // 3.4445 x + b x
  }
  return x;
}

// Muon over matrices of one shape: their updates are orthogonalised together, one batched matmul per step of the
// iteration instead of one per matrix (16 small matrices in the full model: the ops, not the FLOPs, cost).
class MuonGroup {
 public:
  // @p iteration_dtype: the Newton-Schulz iteration's (bf16, as Muon runs it, where the CPU multiplies bf16)
  MuonGroup(std::vector<torch::Tensor> params, torch::ScalarType iteration_dtype)
      : params_(std::move(params)), iteration_dtype_(iteration_dtype) {
    const auto& p = params_.front();
    tall_ = p.size(0) > p.size(1);
    shape_scale_ = std::sqrt(std::max(1.0, static_cast<double>(p.size(0)) / static_cast<double>(p.size(1))));
    momentum_ = torch::zeros({static_cast<int64_t>(params_.size()), p.size(0), p.size(1)}, p.options());
  }

  void step(double lr) {
    std::vector<torch::Tensor> grads;
    for (const auto& p : params_) grads.push_back(p.grad());
    const torch::Tensor g = torch::stack(grads);  // (n, rows, cols)
    momentum_.mul_(kMuonMomentum).add_(g);
    torch::Tensor update = g.add(momentum_, kMuonMomentum);  // Nesterov
    if (tall_) update = update.transpose(1, 2);
    update = orthogonalised(update.to(iteration_dtype_)).to(torch::kFloat);
    if (tall_) update = update.transpose(1, 2);
    at::_foreach_add_(params_, update.unbind(0), -lr * shape_scale_);
    at::_foreach_zero_(grads);
  }

 private:
  std::vector<torch::Tensor> params_;
  torch::Tensor momentum_;  // (n, rows, cols)
  torch::ScalarType iteration_dtype_;
  bool tall_ = false;
  double shape_scale_ = 1;  // sqrt(max(1, rows / cols)): a tall matrix's update as large per entry as a wide one's
};

class FastTrainer : public RecipeTrainer {
 public:
  std::vector<std::string> techniques() const override {
    std::vector<std::string> names = {"large_batch_schedule", "muon"};
    if (bf16_) names.push_back("bf16");
    return names;
  }

 protected:
  bool on(const char* technique) const { return config_.disabled.count(technique) == 0; }

  int64_t batch_size() const override { return on("large_batch_schedule") ? kBatch : config_.recipe.batch; }

  // Muon for the blocks' matrices, AdamW for the rest (the tied embedding, the positions, biases, norms).
  void make_optimizer() override {
    std::map<std::vector<int64_t>, std::vector<torch::Tensor>> matrices;
    std::vector<torch::Tensor> rest;
    for (const auto& p : (*model_)->named_parameters()) {
      const bool matrix = on("muon") && p.value().dim() == 2 && p.key().find(".h.") != std::string::npos;
      if (matrix) {
        matrices[p.value().sizes().vec()].push_back(p.value());
      } else {
        rest.push_back(p.value());
      }
    }
    const torch::ScalarType iteration = bf16_ && on("bf16") ? torch::kBFloat16 : torch::kFloat;
    for (auto& [shape, params] : matrices) muon_.emplace_back(std::move(params), iteration);
    const Recipe& r = config_.recipe;
    adamw_ = std::make_unique<torch::optim::AdamW>(
        rest, torch::optim::AdamWOptions(r.lr).betas({r.beta1, r.beta2}).eps(1e-8).weight_decay(0.0));
  }

  torch::Tensor loss_of(const datasets::Batch& batch) override {
    speedlabs::AutocastGuard autocast(c10::kCPU, c10::kBFloat16, bf16_ && on("bf16"));
    return RecipeTrainer::loss_of(batch);
  }

  void update(int step) override {
    clip_gradients();
    const double scale = schedule(step);
    for (auto& group : adamw_->param_groups()) group.options().set_lr(adamw_peak() * scale);
    adamw_->step();
    adamw_->zero_grad();
    torch::NoGradGuard no_grad;
    for (auto& group : muon_) group.step(kMuonPeak * scale);
  }

 private:
  // The recipe's clipping of the whole gradient's norm, in a few ops over every parameter at once.
  void clip_gradients() {
    std::vector<torch::Tensor> grads;
    for (const auto& p : (*model_)->parameters()) grads.push_back(p.grad());
    const double norm = torch::stack(at::_foreach_norm(grads)).norm().item<double>();
    const double coefficient = config_.recipe.grad_clip / (norm + 1e-6);
    if (coefficient < 1.0) at::_foreach_mul_(grads, coefficient);
  }

  // The learning rate at @p step as a share of the peak.
  double schedule(int step) const {
    if (!on("large_batch_schedule")) return recipe_learning_rate(config_.recipe, step) / config_.recipe.lr;
    if (step < kWarmupSteps) return static_cast<double>(step + 1) / kWarmupSteps;
    const double progress = static_cast<double>(step - kWarmupSteps) / (kDecayEnd - kWarmupSteps);
    return std::max(kFloor, 1.0 - (1.0 - kFloor) * progress);
  }
  double adamw_peak() const { return on("large_batch_schedule") ? kAdamwPeak : config_.recipe.lr; }

  const bool bf16_ = cpu_multiplies_bf16();
  std::vector<MuonGroup> muon_;  // the blocks' matrices by shape, when Muon is on
};

}  // namespace

std::unique_ptr<Trainer> make_trainer() { return std::make_unique<FastTrainer>(); }

}  // namespace lab13
