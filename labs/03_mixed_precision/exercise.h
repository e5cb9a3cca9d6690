/// @file labs/03_mixed_precision/exercise.h
/// @brief Lab 03 exercise: the arithmetic inside a GradScaler, and the mixed-precision training step.
///
/// Stubs live in labs/03_mixed_precision/exercise.cpp, the reference in solutions/03_mixed_precision/exercise.cpp.
/// common/grad_scaler.h does the same work with libtorch's fused kernels; the tests hold your plain-tensor
/// version against it and against numbers from Python's torch.amp.GradScaler.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "common/grad_scaler.h"

namespace lab03 {

/// Unscales gradients in place and detects inf/NaN, with ordinary tensor operations.
///
/// Every gradient is multiplied by @p inv_scale (also when something was inf or NaN: the step is then
/// skipped anyway). The result stays a tensor on the gradients' device so that no host synchronisation
/// happens here; the caller reads it once, when it decides whether to step.
/// @param grads      the gradients (same device, floating point); an empty list is allowed
/// @param inv_scale  1 / the loss scale
/// @return a 0-dim float32 tensor on the gradients' device (the CPU for an empty list): 1 when any element
///         of any gradient was inf or NaN before unscaling, 0 otherwise
torch::Tensor unscale_and_check(const std::vector<torch::Tensor>& grads, double inv_scale);

/// The loss scale and how many clean iterations in a row have passed.
struct ScaleState {
  double scale = 65536.0;      ///< the loss scale (held as float32 by the scaler)
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
                                speedlabs::GradScaler& scaler, c10::DeviceType device_type, c10::ScalarType dtype);

}  // namespace lab03
