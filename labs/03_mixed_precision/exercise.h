/// @file labs/03_mixed_precision/exercise.h
/// @brief Lab 03 exercise: dynamic loss scaling (a C++ torch.amp.GradScaler) and the mixed-precision step.
///
/// libtorch has no GradScaler (pytorch/pytorch#44710), so you write one: scale the loss, unscale the
/// gradients while looking for inf/NaN, skip or take the optimizer step, grow or back off the scale. The
/// lab's experiment and lab 05's fp16 mode run on your scaler. The stubs are in
/// labs/03_mixed_precision/exercise.cpp; the bookkeeping that is not the lesson (constructor checks,
/// getters, state_dict) is given in grad_scaler.cpp. Check your work with `./lab check 03`.
#pragma once
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

namespace lab03 {

/// Unscales gradients in place and detects inf/NaN, with ordinary tensor operations.
///
/// Every gradient is multiplied by @p inv_scale (also when something was inf or NaN: the step is then
/// skipped anyway). The result stays a tensor on the gradients' device so that no host synchronisation
/// happens here; the caller reads it once, when it decides whether to step.
/// @param grads      the gradients (one device, floating point); an empty list is allowed
/// @param inv_scale  1 / the loss scale
/// @return a 0-dim float32 tensor on the gradients' device (the CPU for an empty list): 1 when any element
///         of any gradient was inf or NaN before unscaling, 0 otherwise
torch::Tensor unscale_and_check(const std::vector<torch::Tensor>& grads, double inv_scale);

/// The loss scale and how many clean iterations in a row have passed.
struct ScaleState {
  double scale = 65536.0;      ///< the loss scale (a float32 value, as in torch.amp.GradScaler)
  int64_t growth_tracker = 0;  ///< clean iterations since the last growth or backoff
};

/// The constants of dynamic loss scaling (torch.amp.GradScaler's defaults).
struct ScaleRule {
  double growth_factor = 2.0;      ///< multiply the scale by this after growth_interval clean iterations
  double backoff_factor = 0.5;     ///< multiply the scale by this after an iteration with inf/NaN
  int64_t growth_interval = 2000;  ///< clean iterations needed before a growth
};

/// The scale update of one iteration.
///
/// With inf/NaN: scale * backoff_factor and the tracker back to 0. Otherwise the tracker counts one more
/// clean iteration; when it reaches growth_interval the scale grows by growth_factor (unless that would
/// not be a finite float32, then it stays) and the tracker restarts at 0.
/// @param current    the state before the update
/// @param found_inf  whether this iteration saw an inf/NaN gradient
/// @param rule       the constants
/// @return the state after the update
ScaleState next_scale_state(const ScaleState& current, bool found_inf, const ScaleRule& rule);

/// The constructor arguments of torch.amp.GradScaler, with its defaults.
struct GradScalerOptions {
  double init_scale = 65536.0;     ///< the first scale, 2^16
  double growth_factor = 2.0;      ///< the scale is multiplied by this after growth_interval clean steps
  double backoff_factor = 0.5;     ///< the scale is multiplied by this after a step with inf/NaN gradients
  int64_t growth_interval = 2000;  ///< clean steps in a row before the scale grows
  bool enabled = true;             ///< false makes every method a pass-through
};

/// What state_dict() returns and load_state_dict() takes; the same fields as Python's state_dict().
struct GradScalerState {
  double scale = 65536.0;          ///< the current scale
  double growth_factor = 2.0;      ///< see GradScalerOptions
  double backoff_factor = 0.5;     ///< see GradScalerOptions
  int64_t growth_interval = 2000;  ///< see GradScalerOptions
  int64_t growth_tracker = 0;      ///< clean steps since the last growth or backoff
};

/// JSON with Python's keys: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker.
/// @param json   the output
/// @param state  the state to write
void to_json(nlohmann::json& json, const GradScalerState& state);
/// Reads the keys to_json() writes; throws nlohmann::json::exception when one is missing.
/// @param json   the input
/// @param state  the state to fill
void from_json(const nlohmann::json& json, GradScalerState& state);

/// Dynamic loss scaling, used as in Python: scale(loss).backward(), step(optimizer), update().
///
/// The scale and the growth tracker live on the host (a ScaleState); the found-inf flag of each optimizer
/// stays a tensor on the gradients' device until step() reads it, the one host synchronisation of a step.
/// One scaler may serve several optimizers: unscale_() and step() keep a flag per optimizer, update()
/// combines them and starts the next iteration. The methods marked "exercise" are yours.
class GradScaler {
 public:
  /// @param options  the settings; the defaults are torch.amp.GradScaler's
  /// @throws std::invalid_argument  when enabled with growth_factor <= 1, backoff_factor >= 1 or
  ///         growth_interval < 1
  explicit GradScaler(GradScalerOptions options = {});

  /// Exercise: returns @p outputs multiplied by the scale. Disabled: returns @p outputs itself.
  /// @param outputs  usually the loss
  torch::Tensor scale(const torch::Tensor& outputs);

  /// Exercise: divides the optimizer's gradients by the scale in place (unscale_and_check()) and records
  /// whether any was inf or NaN. Call it before clipping gradients; step() then does not unscale again.
  /// Disabled: does nothing.
  /// @param optimizer  the optimizer whose parameters' gradients are unscaled
  /// @throws std::logic_error  when called twice for one optimizer before update(), or after step()
  /// @throws std::invalid_argument  for float16 or sparse gradients (the master weights must be float32)
  void unscale_(torch::optim::Optimizer& optimizer);

  /// Exercise: unscales (unless unscale_() already did) and calls optimizer.step() only if no gradient was
  /// inf/NaN. Disabled: always steps.
  /// @param optimizer  the optimizer to step
  /// @return true when the optimizer stepped
  /// @throws std::logic_error  when called twice for one optimizer before update()
  bool step(torch::optim::Optimizer& optimizer);

  /// Exercise: adjusts the scale with next_scale_state(): backoff if any optimizer of this iteration saw
  /// inf/NaN, growth after growth_interval clean iterations in a row. Disabled: does nothing.
  /// @throws std::logic_error  when no unscale_() or step() was recorded since the last update()
  void update();

  /// The current scale (1.0 when disabled).
  double get_scale() const;

  /// The clean iterations counted towards the next growth (0 when disabled).
  int64_t get_growth_tracker() const;

  /// Whether the scaler is enabled.
  bool is_enabled() const { return options_.enabled; }

  /// The state to save (Python's state_dict()).
  GradScalerState state_dict() const;

  /// Restores a saved state (Python's load_state_dict()). Disabled: does nothing.
  /// @param state  the state to restore
  void load_state_dict(const GradScalerState& state);

 private:
  /// Where one optimizer is in the current iteration.
  enum class Stage { ready, unscaled, stepped };
  /// One optimizer's progress and its found-inf flag (a 0-dim float32 tensor, > 0 when inf/NaN was seen).
  struct PerOptimizer {
    Stage stage = Stage::ready;
    torch::Tensor found_inf;
  };

  /// The defined gradients of @p optimizer's parameters (given, in grad_scaler.cpp).
  /// @throws std::invalid_argument  for a float16 or sparse gradient
  static std::vector<torch::Tensor> gradients_of(torch::optim::Optimizer& optimizer);
  /// growth_factor, backoff_factor and growth_interval of the options, for next_scale_state().
  ScaleRule rule() const { return {options_.growth_factor, options_.backoff_factor, options_.growth_interval}; }

  GradScalerOptions options_;
  ScaleState state_;  ///< the scale and the growth tracker
  std::unordered_map<const torch::optim::Optimizer*, PerOptimizer> per_optimizer_;
};

/// What one training step did.
struct StepResult {
  double loss = 0;       ///< the (unscaled) loss of this step, as computed under autocast
  bool stepped = false;  ///< false when the scaler skipped the optimizer step
};

/// One mixed-precision training step: zero the gradients, compute the loss under autocast, backward the
/// scaled loss (outside autocast), step through the scaler, update the scale.
///
/// With bfloat16 pass a disabled scaler: the same code then is the plain autocast step.
/// @param compute_loss  runs the forward pass and returns the scalar loss
/// @param optimizer     the optimizer of the model's float32 (master) parameters
/// @param scaler        the loss scaler (enabled for float16)
/// @param device_type   the device type autocast is enabled for
/// @param dtype         the autocast dtype (kHalf or kBFloat16)
/// @return the loss and whether the optimizer stepped
StepResult mixed_precision_step(const std::function<torch::Tensor()>& compute_loss, torch::optim::Optimizer& optimizer,
                                GradScaler& scaler, c10::DeviceType device_type, c10::ScalarType dtype);

}  // namespace lab03
