#include "common/grad_scaler.h"

#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace speedlabs {

void to_json(nlohmann::json& json, const GradScalerState& state) {
  json = {{"scale", state.scale},
          {"growth_factor", state.growth_factor},
          {"backoff_factor", state.backoff_factor},
          {"growth_interval", state.growth_interval},
          {"_growth_tracker", state.growth_tracker}};
}

void from_json(const nlohmann::json& json, GradScalerState& state) {
  state.scale = json.at("scale").get<double>();
  state.growth_factor = json.at("growth_factor").get<double>();
  state.backoff_factor = json.at("backoff_factor").get<double>();
  state.growth_interval = json.at("growth_interval").get<int64_t>();
  state.growth_tracker = json.at("_growth_tracker").get<int64_t>();
}

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  if (options_.enabled) {
    if (!(options_.growth_factor > 1.0)) throw std::invalid_argument("GradScaler: growth_factor must be > 1");
    if (!(options_.backoff_factor < 1.0)) throw std::invalid_argument("GradScaler: backoff_factor must be < 1");
    if (options_.growth_interval < 1) throw std::invalid_argument("GradScaler: growth_interval must be >= 1");
  }
}

torch::Tensor GradScaler::scale(const torch::Tensor& outputs) {
  if (!options_.enabled) return outputs;
  if (!scale_.defined()) {
    scale_ = torch::full({}, options_.init_scale, torch::dtype(torch::kFloat32).device(outputs.device()));
    growth_tracker_ = torch::full({}, initial_growth_tracker_, torch::dtype(torch::kInt32).device(outputs.device()));
  }
  return outputs * scale_.to(outputs.device(), /*non_blocking=*/true);
}

void GradScaler::unscale_(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  PerOptimizer& state = per_optimizer_[&optimizer];
  if (state.stage == Stage::unscaled) {
    throw std::logic_error("GradScaler::unscale_() has already been called on this optimizer since the last update()");
  }
  if (state.stage == Stage::stepped) throw std::logic_error("GradScaler::unscale_() is being called after step()");
  if (!scale_.defined()) throw std::logic_error("GradScaler::unscale_() before any scale(): nothing was scaled");

  // The reciprocal in double, as Python does, so 1/scale is exact for powers of two and close otherwise.
  const auto inv_scale = scale_.to(torch::kFloat64).reciprocal().to(torch::kFloat32);
  const auto found_inf = torch::zeros({}, scale_.options());
  // The fused op wants one device and one dtype per call.
  std::map<std::pair<std::string, c10::ScalarType>, std::vector<torch::Tensor>> groups;
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& parameter : group.params()) {
      const auto& grad = parameter.grad();
      if (!grad.defined()) continue;
      if (grad.scalar_type() == torch::kHalf) {
        throw std::invalid_argument("GradScaler: attempting to unscale float16 gradients; keep the weights float32");
      }
      if (grad.is_sparse()) throw std::invalid_argument("GradScaler: sparse gradients are not supported");
      groups[{grad.device().str(), grad.scalar_type()}].push_back(grad);
    }
  }
  for (auto& [key, grads] : groups) {
    const auto device = grads.front().device();
    auto found_on_device = found_inf.to(device);
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_on_device, inv_scale.to(device));
    if (device != found_inf.device()) found_inf.add_(found_on_device.to(found_inf.device()));
  }
  state.found_inf = found_inf;
  state.stage = Stage::unscaled;
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  auto it = per_optimizer_.find(&optimizer);
  if (it != per_optimizer_.end() && it->second.stage == Stage::stepped) {
    throw std::logic_error("GradScaler::step() has already been called since the last update()");
  }
  if (it == per_optimizer_.end() || it->second.stage == Stage::ready) unscale_(optimizer);
  PerOptimizer& state = per_optimizer_.at(&optimizer);
  // The one host synchronisation: the step decision needs the flag on the host.
  const bool skip = state.found_inf.item<float>() != 0.0f;
  if (!skip) optimizer.step();
  state.stage = Stage::stepped;
  return !skip;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  std::vector<torch::Tensor> found_infs;
  for (const auto& [optimizer, state] : per_optimizer_) {
    if (state.found_inf.defined()) found_infs.push_back(state.found_inf.to(scale_.device()));
  }
  if (found_infs.empty()) throw std::logic_error("GradScaler::update(): no inf checks were recorded before update()");
  auto found_inf_combined = found_infs.front().clone();
  for (size_t i = 1; i < found_infs.size(); ++i) found_inf_combined += found_infs[i];
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf_combined, options_.growth_factor,
                         options_.backoff_factor, options_.growth_interval);
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!options_.enabled) return 1.0;
  return scale_.defined() ? scale_.item<double>() : options_.init_scale;
}

int64_t GradScaler::get_growth_tracker() const {
  if (!options_.enabled) return 0;
  return growth_tracker_.defined() ? growth_tracker_.item<int64_t>() : initial_growth_tracker_;
}

GradScalerState GradScaler::state_dict() const {
  if (!options_.enabled) return {};
  return {get_scale(), options_.growth_factor, options_.backoff_factor, options_.growth_interval,
          get_growth_tracker()};
}

void GradScaler::load_state_dict(const GradScalerState& state) {
  if (!options_.enabled) return;
  options_.init_scale = state.scale;
  options_.growth_factor = state.growth_factor;
  options_.backoff_factor = state.backoff_factor;
  options_.growth_interval = state.growth_interval;
  initial_growth_tracker_ = state.growth_tracker;
  if (scale_.defined()) scale_.fill_(state.scale);
  if (growth_tracker_.defined()) growth_tracker_.fill_(state.growth_tracker);
}

}  // namespace speedlabs
