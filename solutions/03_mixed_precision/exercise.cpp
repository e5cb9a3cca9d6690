// Lab 03 reference solution.
#include "exercise.h"

#include <cmath>
#include <limits>

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

StepResult mixed_precision_step(const std::function<torch::Tensor()>& compute_loss, torch::optim::Optimizer& optimizer,
                                speedlabs::GradScaler& scaler, c10::DeviceType device_type, c10::ScalarType dtype) {
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
