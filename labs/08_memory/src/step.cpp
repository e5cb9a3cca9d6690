// Lab 08's measured training step, shared by the lesson's three parts (parts.h).
#include <torch/torch.h>

#include <iomanip>
#include <optional>
#include <sstream>

#include "common/autocast_guard.h"
#include "common/errors.h"
#include "common/format.h"
#include "common/gpt.h"
#include "common/process.h"
#include "common/timer.h"
#include "exercise.h"
#include "labs/05_gpt2/exercise.h"
#include "parts.h"

namespace lab08 {

using speedlabs::gpt::GPT;
using speedlabs::gpt::GPTConfig;

double mib(int64_t bytes) { return speedlabs::to_mib(static_cast<double>(bytes)); }

std::string mib_text(int64_t bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << mib(bytes) << " MiB";
  return out.str();
}

GPTConfig checked_config(const std::string& model, int64_t seq) {
  const GPTConfig config = GPTConfig::by_name(model);
  config.require_sequence_fits(seq, "--seq " + std::to_string(seq));
  return config;
}

GPT build_model(const GPTConfig& config, const c10::Device& device) {
  torch::manual_seed(kSeed);
  GPT model(config, lab05::causal_attention);
  model->to(device);
  return model;
}

std::pair<torch::Tensor, torch::Tensor> random_batch(const GPTConfig& config, const StepSetup& setup,
                                                     const c10::Device& device) {
  torch::manual_seed(kSeed + 1);
  const auto options = torch::TensorOptions().dtype(torch::kLong);
  return {torch::randint(config.vocab_size, {setup.batch, setup.seq}, options).to(device),
          torch::randint(config.vocab_size, {setup.batch, setup.seq}, options).to(device)};
}

torch::Tensor step_loss(GPT& model, const torch::Tensor& x, const torch::Tensor& y, const StepSetup& setup) {
  std::optional<speedlabs::AutocastGuard> autocast;
  if (setup.autocast) autocast.emplace(x.device().type(), *setup.autocast);
  const auto positions = torch::arange(x.size(1), x.options());
  auto h = model->wte->forward(x) + model->wpe->forward(positions);
  for (const auto& module : *model->h) {
    auto* block = module->as<speedlabs::gpt::Block>();
    const BlockFn run = [block](const torch::Tensor& input) { return block->forward(input); };
    h = setup.checkpoint ? checkpointed_block(run, h) : run(h);
  }
  h = model->ln_f->forward(h);
  const auto logits = torch::nn::functional::linear(h, model->lm_head_weight());
  return torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}), y.view({-1}));
}

void memory_train_step(GPT& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x, const torch::Tensor& y,
                       const StepSetup& setup) {
  step_loss(model, x, y, setup).backward();
  optimizer.step();
  optimizer.zero_grad();
}

speedlabs::Interleaved time_steps(const std::string& model, const StepSetup& a, const StepSetup& b,
                                  const c10::Device& device, int warmup, int repeats) {
  const GPTConfig config = checked_config(model, a.seq);
  const auto batch = random_batch(config, a, device);
  GPT model_a = build_model(config, device);
  GPT model_b = build_model(config, device);
  auto optimizer_a = speedlabs::gpt::make_adamw(model_a, kLr);
  auto optimizer_b = speedlabs::gpt::make_adamw(model_b, kLr);
  return speedlabs::time_interleaved(
      {[&] {
         speedlabs::stop_if_asked("while timing the checkpointed step");  // Ctrl-C: between two steps
         memory_train_step(model_a, optimizer_a, batch.first, batch.second, a);
       },
       [&] { memory_train_step(model_b, optimizer_b, batch.first, batch.second, b); }},
      device, {warmup, repeats});
}

}  // namespace lab08
