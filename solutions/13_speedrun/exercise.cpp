// Lab 13 reference solution: the course's fastest CPU trainer for the speedrun. Each technique can be turned
// off by name (TrainerConfig::disabled) for the lab's ablation.
#include <algorithm>

#include "baseline.h"
#include "common/autocast_guard.h"
#include "common/gpt.h"
#include "datasets/data_loader.h"
#include "exercise.h"

namespace lab13 {

namespace gpt = speedlabs::gpt;

namespace {

// The learning rate: a short linear warm-up to twice the baseline's, back down to the baseline's by the end of
// the small-batch steps (a large rate speeds the first descent and slows the later one).
constexpr double kPeakLrFactor = 2.0;
constexpr int kWarmupSteps = 10;
// The batch ramp: the first kSmallBatchSteps steps take a quarter of the baseline's B (early in training they
// move the loss nearly as far per step, at about a quarter of the step's time); later steps take the whole B,
// since the gradient's noise then costs more steps than the smaller batch saves.
constexpr int64_t kBatchDivisor = 4;
constexpr int kSmallBatchSteps = 200;

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
    small_ = on_("small_batch") ? std::max<int64_t>(1, config.batch / kBatchDivisor) : config.batch;
    loader_ = std::make_unique<datasets::DataLoaderLite>(*config.train_tokens, small_, config.seq);
  }

  // (B, T) tokens and targets: one small batch early, then as many as make the run's B (the stream's order kept).
  datasets::Batch next_batch() {
    const int64_t parts = steps_ < kSmallBatchSteps ? 1 : config_.batch / small_;
    std::vector<torch::Tensor> xs, ys;
    for (int64_t i = 0; i < parts; ++i) {
      datasets::Batch part = loader_->next_batch();
      xs.push_back(part.x);
      ys.push_back(part.y);
    }
    batch_ = parts * small_;
    return {torch::cat(xs), torch::cat(ys)};
  }

  void step() override {
    set_learning_rate();
    const datasets::Batch batch = next_batch();
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

  gpt::NamedTensors weights() override { return weights_of(*model_); }

  int64_t batch() const override { return batch_; }

  std::vector<std::string> techniques() const override { return {"small_batch", "lr_schedule", "bf16", "sdpa"}; }

 private:
  // Warm-up to kPeakLrFactor x the baseline's rate, then linearly back to it over the small-batch steps.
  void set_learning_rate() {
    double lr = config_.lr;
    if (on_("lr_schedule")) {
      const double warm = std::min(1.0, static_cast<double>(steps_ + 1) / kWarmupSteps);
      const double boost = std::max(0.0, 1.0 - static_cast<double>(steps_) / kSmallBatchSteps);
      lr = config_.lr * warm * (1.0 + (kPeakLrFactor - 1.0) * boost);
    }
    for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
  }

  TrainerConfig config_;
  std::function<bool(const char*)> on_;
  std::unique_ptr<gpt::GPT> model_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  std::unique_ptr<datasets::DataLoaderLite> loader_;
  int64_t small_ = 0;  // B of a small-batch step
  int64_t batch_ = 0;  // B of the latest step
  int steps_ = 0;
};

}  // namespace

std::unique_ptr<Trainer> make_trainer() { return std::make_unique<FastTrainer>(); }

}  // namespace lab13
