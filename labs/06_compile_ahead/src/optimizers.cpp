#include "optimizers.h"

#include "common/errors.h"

namespace lab06 {

namespace {

// The parameters' device; every optimizer here needs at least one parameter.
c10::Device device_of(const std::vector<torch::Tensor>& params) {
  if (params.empty()) throw speedlabs::UsageError("AdamW needs at least one parameter");
  return params.front().device();
}

// A float32 0-dim tensor on @p device: a step count or a learning rate.
torch::Tensor scalar_tensor(double value, const c10::Device& device) {
  return torch::full({}, value, torch::TensorOptions().device(device).dtype(torch::kFloat));
}

}  // namespace

MultiTensorAdamW::MultiTensorAdamW(std::vector<torch::Tensor> params, double lr, AdamWHyperparameters hyper,
                                   const c10::Device& steps_device)
    : torch::optim::Optimizer(params, std::make_unique<torch::optim::AdamWOptions>(lr)), hyper_(hyper) {
  const auto device = device_of(params);
  for (const auto& p : params) {
    if (p.device() != device) {
      throw speedlabs::UsageError("AdamW's parameters must share one device (" + device.str() + " and " +
                                  p.device().str() + ")");
    }
    state_.params.push_back(p);
    state_.exp_avgs.push_back(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    state_.exp_avg_sqs.push_back(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    state_.steps.push_back(scalar_tensor(0, steps_device));
  }
}

AdamWTensors MultiTensorAdamW::active(const LossClosure& closure) const {
  if (closure) throw speedlabs::UsageError("this AdamW's step takes no closure");
  AdamWTensors active;
  for (size_t i = 0; i < state_.params.size(); ++i) {
    const auto& grad = state_.params[i].grad();
    if (!grad.defined()) continue;
    active.params.push_back(state_.params[i]);
    active.grads.push_back(grad);
    active.exp_avgs.push_back(state_.exp_avgs[i]);
    active.exp_avg_sqs.push_back(state_.exp_avg_sqs[i]);
    active.steps.push_back(state_.steps[i]);
  }
  return active;
}

ForeachAdamW::ForeachAdamW(std::vector<torch::Tensor> params, double lr, AdamWHyperparameters hyper)
    : MultiTensorAdamW(std::move(params), lr, hyper, c10::Device(c10::kCPU)), lr_(lr) {}

torch::Tensor ForeachAdamW::step(LossClosure closure) {
  auto t = active(closure);
  if (t.params.empty()) return {};
  torch::NoGradGuard no_grad;  // the updates are in place on leaves that require grad
  foreach_adamw_update(t, lr_, hyper_);
  return {};
}

FusedAdamW::FusedAdamW(std::vector<torch::Tensor> params, double lr, AdamWHyperparameters hyper)
    : MultiTensorAdamW(params, lr, hyper, device_of(params)), lr_(scalar_tensor(lr, device_of(params))) {}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  auto t = active(closure);
  torch::NoGradGuard no_grad;
  if (!t.params.empty()) fused_adamw_update(t, lr_, hyper_);
  return {};
}

void FusedAdamW::set_lr(double lr) { lr_.fill_(lr); }

}  // namespace lab06
