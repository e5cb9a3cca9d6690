// Lab 03 reference solution.
#include "exercise.h"

#include <cmath>
#include <stdexcept>

#include "common/autocast_guard.h"

namespace lab03 {

torch::Tensor unscale_and_check(const std::vector<torch::Tensor>& grads, double inv_scale) {
  const auto device = grads.empty() ? torch::Device(torch::kCPU) : grads.front().device();
  auto found_inf = torch::zeros({}, torch::dtype(torch::kFloat32).device(device));
  for (const auto& grad : grads) {
    // Checked before the multiply, as the fused kernel does; no .item(), so nothing waits for the device.
    found_inf = torch::maximum(found_inf, torch::logical_not(torch::isfinite(grad)).any().to(torch::kFloat32));
    grad.mul_(inv_scale);
  }
  return found_inf;
}

ScaleState next_scale_state(const ScaleState& current, bool found_inf, const ScaleRule& rule) {
  if (found_inf) return {current.scale * rule.backoff_factor, 0};
  const int64_t clean = current.growth_tracker + 1;
  if (clean < rule.growth_interval) return {current.scale, clean};
  const float grown = static_cast<float>(current.scale * rule.growth_factor);  // the scale is a float32
  return {std::isfinite(grown) ? static_cast<double>(grown) : current.scale, 0};
}

torch::Tensor GradScaler::scale(const torch::Tensor& outputs) {
  if (!options_.enabled) return outputs;
  return outputs * state_.scale;
}

void GradScaler::unscale_(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  PerOptimizer& progress = per_optimizer_[&optimizer];
  if (progress.stage == Stage::unscaled) {
    throw std::logic_error("GradScaler::unscale_() has already been called on this optimizer since the last update()");
  }
  if (progress.stage == Stage::stepped) throw std::logic_error("GradScaler::unscale_() is being called after step()");
  // Python takes the reciprocal in double and rounds it to float32; for a power-of-two scale it is exact.
  const double inv_scale = static_cast<float>(1.0 / state_.scale);
  progress.found_inf = unscale_and_check(gradients_of(optimizer), inv_scale);
  progress.stage = Stage::unscaled;
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  const auto it = per_optimizer_.find(&optimizer);
  if (it != per_optimizer_.end() && it->second.stage == Stage::stepped) {
    throw std::logic_error("GradScaler::step() has already been called since the last update()");
  }
  if (it == per_optimizer_.end() || it->second.stage == Stage::ready) unscale_(optimizer);
  PerOptimizer& progress = per_optimizer_.at(&optimizer);
  // The one host synchronisation: whether to step is decided on the host.
  const bool skip = progress.found_inf.item<float>() != 0.0f;
  if (!skip) optimizer.step();
  progress.stage = Stage::stepped;
  return !skip;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  if (per_optimizer_.empty())
    throw std::logic_error("GradScaler::update(): no inf checks were recorded before update()");
  bool found_inf = false;
  for (const auto& [optimizer, progress] : per_optimizer_)
    found_inf = found_inf || progress.found_inf.item<float>() != 0.0f;
  state_ = next_scale_state(state_, found_inf, rule());
  per_optimizer_.clear();
}

StepResult mixed_precision_step(const std::function<torch::Tensor()>& compute_loss, torch::optim::Optimizer& optimizer,
                                GradScaler& scaler, c10::DeviceType device_type, c10::ScalarType dtype) {
  optimizer.zero_grad();
  torch::Tensor loss;
  {
    speedlabs::AutocastGuard autocast(device_type, dtype);
    loss = compute_loss();
  }
  // Backward outside autocast: each op's backward runs in the dtype its forward used.
  scaler.scale(loss).backward();
  const bool stepped = scaler.step(optimizer);
  scaler.update();
  return {loss.item<double>(), stepped};
}

}  // namespace lab03
