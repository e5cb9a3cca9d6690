// Lab 13 reference solution: the course's fastest CPU trainer for the speedrun. Each technique can be turned
// off by name (TrainerConfig::disabled) for the lab's ablation.
#include <cmath>
#include <limits>

#include "common/autocast_guard.h"
#include "common/gpt.h"
#include "datasets/data_loader.h"
#include "exercise.h"

namespace lab13 {

namespace gpt = speedlabs::gpt;

namespace {

torch::Tensor written_out_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t T = q.size(-2);
  auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  const auto future = torch::ones({T, T}, q.options().dtype(torch::kBool)).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v);
}

// How much larger the peak learning rate is than the baseline's, and the warm-up's steps.
constexpr double kPeakLrFactor = 2.0;
constexpr int kWarmupSteps = 10;

class FastTrainer : public Trainer {
 public:
  void init(const TrainerConfig& config) override {
    config_ = config;
    on_ = [this](const char* name) { return config_.disabled.count(name) == 0; };
    torch::manual_seed(config.seed);
    // lab 09: libtorch's fused attention (the GPT's default) never builds the T x T scores in memory.
    model_ = std::make_unique<gpt::GPT>(config.model, on_("sdpa") ? gpt::AttentionFn(gpt::fused_causal_attention)
                                                                  : gpt::AttentionFn(written_out_attention));
    optimizer_ = std::make_unique<torch::optim::AdamW>(gpt::make_adamw(*model_, config.lr));
    loader_ = std::make_unique<datasets::DataLoaderLite>(*config.train_tokens, config.batch, config.seq);
  }

  void step() override {
    set_learning_rate();
    const datasets::Batch batch = loader_->next_batch();
    torch::Tensor loss;
    {
      // labs 03 and 05: the forward pass in bf16 where the CPU multiplies bf16 pairs (avx512_bf16, AMX).
      speedlabs::AutocastGuard autocast(c10::kCPU, c10::kBFloat16, on_("bf16"));
      loss = (*model_)->forward(batch.x, batch.y).loss;
    }
    loss.backward();
    optimizer_->step();
    optimizer_->zero_grad();
    ++steps_;
  }

  gpt::NamedTensors weights() override {
    gpt::NamedTensors named;
    for (const auto& p : (*model_)->named_parameters()) named.emplace_back(p.key(), p.value().detach());
    return named;
  }

  std::vector<std::string> techniques() const override { return {"sdpa", "bf16", "lr_schedule"}; }

 private:
  // A larger peak after a short linear warm-up: fewer steps to the target than the baseline's constant rate.
  void set_learning_rate() {
    double lr = config_.lr;
    if (on_("lr_schedule")) {
      lr = config_.lr * kPeakLrFactor * std::min(1.0, static_cast<double>(steps_ + 1) / kWarmupSteps);
    }
    for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
  }

  TrainerConfig config_;
  std::function<bool(const char*)> on_;
  std::unique_ptr<gpt::GPT> model_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  std::unique_ptr<datasets::DataLoaderLite> loader_;
  int steps_ = 0;
};

}  // namespace

std::unique_ptr<Trainer> make_trainer() { return std::make_unique<FastTrainer>(); }

}  // namespace lab13
