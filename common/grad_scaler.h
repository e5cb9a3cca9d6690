/// @file grad_scaler.h
/// @brief torch.amp.GradScaler for C++: dynamic loss scaling for float16 training.
///
/// libtorch has no GradScaler (pytorch/pytorch#44710). This one keeps the semantics and defaults of
/// Python's torch.amp.GradScaler and is built on the same fused ops,
/// at::_amp_foreach_non_finite_check_and_unscale_ and at::_amp_update_scale_. The "found inf" flag stays a
/// tensor on the gradients' device; step() reads it to the host once, to decide whether to step.
#pragma once
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdint>
#include <unordered_map>

namespace speedlabs {

/// The constructor arguments of torch.amp.GradScaler, with its defaults.
struct GradScalerOptions {
  double init_scale = 65536.0;    ///< the first scale, 2^16
  double growth_factor = 2.0;     ///< the scale is multiplied by this after growth_interval clean steps
  double backoff_factor = 0.5;    ///< the scale is multiplied by this after a step with inf/NaN gradients
  int64_t growth_interval = 2000; ///< clean steps in a row before the scale grows
  bool enabled = true;            ///< false makes every method a pass-through
};

/// What state_dict() returns and load_state_dict() takes; the same fields as Python's state_dict().
struct GradScalerState {
  double scale = 65536.0;         ///< the current scale
  double growth_factor = 2.0;     ///< see GradScalerOptions
  double backoff_factor = 0.5;    ///< see GradScalerOptions
  int64_t growth_interval = 2000; ///< see GradScalerOptions
  int64_t growth_tracker = 0;     ///< clean steps since the last growth or backoff
};

/// JSON with Python's keys: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker.
/// @param json   the output
/// @param state  the state to write
void to_json(nlohmann::json& json, const GradScalerState& state);
/// Reads the keys to_json() writes; throws nlohmann::json::exception when one is missing.
/// @param json   the input
/// @param state  the state to fill
void from_json(const nlohmann::json& json, GradScalerState& state);

/// Dynamic loss scaling: scale(loss).backward(), step(optimizer), update(), as in Python.
///
/// One scaler may serve several optimizers: unscale_() and step() keep a found-inf flag per optimizer,
/// update() combines them and starts the next iteration.
class GradScaler {
 public:
  /// @param options  the settings; the defaults are torch.amp.GradScaler's
  explicit GradScaler(GradScalerOptions options = {});

  /// Returns @p outputs multiplied by the scale (the scale lives on the outputs' device from the first call).
  /// Disabled: returns @p outputs unchanged.
  /// @param outputs  usually the loss
  torch::Tensor scale(const torch::Tensor& outputs);

  /// Divides the optimizer's gradients by the scale in place and records whether any is inf or NaN.
  /// Call it before clipping gradients; step() then does not unscale again. Disabled: does nothing.
  /// @param optimizer  the optimizer whose parameters' gradients are unscaled
  /// @throws std::logic_error  when called twice for one optimizer before update(), or after step()
  /// @throws std::invalid_argument  for float16 gradients (the master weights must be float32)
  void unscale_(torch::optim::Optimizer& optimizer);

  /// Unscales (unless unscale_() already did) and calls optimizer.step() only if no gradient was inf/NaN.
  /// Disabled: always steps.
  /// @param optimizer  the optimizer to step
  /// @return true when the optimizer stepped
  /// @throws std::logic_error  when called twice for one optimizer before update()
  bool step(torch::optim::Optimizer& optimizer);

  /// Adjusts the scale: times backoff_factor if any step of this iteration saw inf/NaN, times growth_factor
  /// after growth_interval clean iterations in a row. Disabled: does nothing.
  /// @throws std::logic_error  when no unscale_() or step() was recorded since the last update()
  void update();

  /// The current scale as a host number (1.0 when disabled; init_scale before the first scale()).
  double get_scale() const;

  /// The clean iterations counted towards the next growth.
  int64_t get_growth_tracker() const;

  /// Whether the scaler is enabled.
  bool is_enabled() const { return options_.enabled; }

  /// The state to save (Python's state_dict()).
  GradScalerState state_dict() const;

  /// Restores a saved state (Python's load_state_dict()). Disabled: does nothing.
  /// @param state  the state to restore
  void load_state_dict(const GradScalerState& state);

 private:
  enum class Stage { ready, unscaled, stepped };
  struct PerOptimizer {
    Stage stage = Stage::ready;
    torch::Tensor found_inf;  ///< float32 scalar on the gradients' device: > 0 when a gradient was inf/NaN
  };

  GradScalerOptions options_;
  torch::Tensor scale_;           ///< float32 scalar, created on the first scale()
  torch::Tensor growth_tracker_;  ///< int32 scalar next to scale_
  int64_t initial_growth_tracker_ = 0;
  std::unordered_map<const torch::optim::Optimizer*, PerOptimizer> per_optimizer_;
};

}  // namespace speedlabs
