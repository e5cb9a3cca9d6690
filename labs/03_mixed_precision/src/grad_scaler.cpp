// Lab 03: the parts of the GradScaler that are not the exercise: argument checks, getters, state_dict,
// JSON, and collecting an optimizer's gradients. scale(), unscale_(), step() and update() are in
// exercise.cpp (yours) and solutions/03_mixed_precision/exercise.cpp.
#include <stdexcept>

#include "exercise.h"

namespace lab03 {

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

GradScaler::GradScaler(GradScalerOptions options) : options_(options), state_{options.init_scale, 0} {
  if (options_.enabled) {
    if (!(options_.growth_factor > 1.0)) throw std::invalid_argument("GradScaler: growth_factor must be > 1");
    if (!(options_.backoff_factor < 1.0)) throw std::invalid_argument("GradScaler: backoff_factor must be < 1");
    if (options_.growth_interval < 1) throw std::invalid_argument("GradScaler: growth_interval must be >= 1");
  }
}

std::vector<torch::Tensor> GradScaler::gradients_of(torch::optim::Optimizer& optimizer) {
  std::vector<torch::Tensor> grads;
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& parameter : group.params()) {
      const auto& grad = parameter.grad();
      if (!grad.defined()) continue;
      if (grad.scalar_type() == torch::kHalf) {
        throw std::invalid_argument("GradScaler: attempting to unscale float16 gradients; keep the weights float32");
      }
      if (grad.is_sparse()) throw std::invalid_argument("GradScaler: sparse gradients are not supported");
      grads.push_back(grad);
    }
  }
  return grads;
}

double GradScaler::get_scale() const { return options_.enabled ? state_.scale : 1.0; }

int64_t GradScaler::get_growth_tracker() const { return options_.enabled ? state_.growth_tracker : 0; }

GradScalerState GradScaler::state_dict() const {
  if (!options_.enabled) return {};
  return {state_.scale, options_.growth_factor, options_.backoff_factor, options_.growth_interval,
          state_.growth_tracker};
}

void GradScaler::load_state_dict(const GradScalerState& state) {
  if (!options_.enabled) return;
  options_.growth_factor = state.growth_factor;
  options_.backoff_factor = state.backoff_factor;
  options_.growth_interval = state.growth_interval;
  state_ = {state.scale, state.growth_tracker};
}

}  // namespace lab03
