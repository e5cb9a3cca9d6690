// Lab 03 exercise: dynamic loss scaling and the mixed-precision training step.
//
// Replace each stub below; the comment above each TODO says why the function exists and how to write it.
// The declarations and their full contracts are in exercise.h; the lesson is README.md ("The exercise").
// Check your work with ./lab check 03.
#include "exercise.h"

#include "common/autocast_guard.h"
#include "common/errors.h"

namespace lab03 {

// Why: float16 gradients smaller than 2^-24 become 0, so the loss (and with it every gradient) is multiplied
// by a large scale before backward. Before the optimizer may use them, the gradients must be divided by the
// same scale, and a step whose gradients overflowed to inf (or became NaN) must be recognised and skipped.
// Hints:
// - torch::isfinite(grad) is false where an element is inf or NaN; .any() reduces that to one boolean tensor.
// - Combine the per-gradient flags with torch::maximum (or logical_or) into one 0-dim float32 tensor that
//   starts at zero on the gradients' device (the CPU when the list is empty).
// - grad.mul_(inv_scale) unscales in place. Check before you multiply.
// - Never call .item() here: on a GPU it would make the host wait for the device.
torch::Tensor unscale_and_check(const std::vector<torch::Tensor>& /*grads*/, double /*inv_scale*/) {
  // TODO(lab03): return the found-inf flag and unscale every gradient.
  speedlabs::not_implemented("03", "03_mixed_precision", "unscale_and_check");
}

// Why: the right scale is the largest one that does not overflow. Dynamic scaling finds it by trial: halve
// after an overflow, and try doubling after growth_interval clean iterations in a row.
// Hints:
// - found_inf: scale * backoff_factor, tracker 0.
// - Otherwise the tracker counts one more clean iteration; when it reaches growth_interval the scale is
//   multiplied by growth_factor and the tracker starts again at 0.
// - The scale is a float32 in torch.amp.GradScaler: if static_cast<float>(grown) is not finite
//   (std::isfinite), keep the old scale (the tracker still restarts).
ScaleState next_scale_state(const ScaleState& /*current*/, bool /*found_inf*/, const ScaleRule& /*rule*/) {
  // TODO(lab03): back off on inf/NaN; otherwise count the clean iteration and grow at growth_interval.
  speedlabs::not_implemented("03", "03_mixed_precision", "next_scale_state");
}

// Why: scale() is the first half of loss scaling: backward of (loss * scale) gives gradients * scale.
// Hints:
// - A disabled scaler returns outputs itself (the tests check it is the same tensor).
// - Otherwise multiply by state_.scale; a plain double keeps the step free of host-device traffic.
torch::Tensor GradScaler::scale(const torch::Tensor& /*outputs*/) {
  // TODO(lab03): multiply by the current scale (or pass through when disabled).
  speedlabs::not_implemented("03", "03_mixed_precision", "GradScaler::scale");
}

// Why: unscaling is separate from step() so that a user can clip gradients between the two, and it must
// happen exactly once per iteration, or the gradients would be divided twice.
// Hints:
// - Disabled: return at once.
// - per_optimizer_[&optimizer] holds this optimizer's stage: throw std::logic_error when it is already
//   Stage::unscaled or Stage::stepped.
// - inv_scale: as Python does, 1 / scale rounded to a float32 (static_cast<float>).
// - gradients_of(optimizer) gives the gradients (and refuses float16 ones); unscale_and_check() does the work.
// - Keep the flag it returns in found_inf and set the stage to Stage::unscaled.
void GradScaler::unscale_(torch::optim::Optimizer& /*optimizer*/) {
  // TODO(lab03): unscale this optimizer's gradients once and record its found-inf flag.
  speedlabs::not_implemented("03", "03_mixed_precision", "GradScaler::unscale_");
}

// Why: an optimizer step with inf/NaN gradients would destroy the weights; skipping it costs one step.
// Hints:
// - Disabled: optimizer.step() and return true.
// - Throw std::logic_error when this optimizer is already Stage::stepped in this iteration.
// - If unscale_() has not run for this optimizer (no entry yet, or Stage::ready), call it.
// - Read the flag once (.item<float>()): this is the one host synchronisation of the step.
// - Step only when it is 0; set the stage to Stage::stepped; return whether you stepped.
bool GradScaler::step(torch::optim::Optimizer& /*optimizer*/) {
  // TODO(lab03): step the optimizer unless its gradients held inf or NaN.
  speedlabs::not_implemented("03", "03_mixed_precision", "GradScaler::step");
}

// Why: the scale follows the gradients: down after an overflow, up after a long clean run.
// Hints:
// - Disabled: return at once.
// - No optimizer recorded since the last update() (per_optimizer_ empty): throw std::logic_error.
// - found_inf for the iteration: any optimizer's flag is non-zero.
// - state_ = next_scale_state(state_, found_inf, rule()); then clear per_optimizer_ for the next iteration.
void GradScaler::update() {
  // TODO(lab03): combine the flags, update the scale, start the next iteration.
  speedlabs::not_implemented("03", "03_mixed_precision", "GradScaler::update");
}

// Why: this is the mixed-precision step of chapter 9: the forward pass (and the loss) in 16 bits under
// autocast, the backward pass outside it, the update on float32 master weights through the scaler.
// Hints:
// - optimizer.zero_grad() first.
// - Compute the loss inside a block that holds a speedlabs::AutocastGuard(device_type, dtype)
//   (common/autocast_guard.h); leave the block before backward: autograd already runs each op's backward
//   in the dtype its forward used.
// - scaler.scale(loss).backward(); stepped = scaler.step(optimizer); scaler.update().
// - Return {loss.item<double>(), stepped}.
StepResult mixed_precision_step(const std::function<torch::Tensor()>& /*compute_loss*/,
                                torch::optim::Optimizer& /*optimizer*/, GradScaler& /*scaler*/,
                                c10::DeviceType /*device_type*/, c10::ScalarType /*dtype*/) {
  // TODO(lab03): zero_grad, forward under autocast, scaled backward, step, update.
  speedlabs::not_implemented("03", "03_mixed_precision", "mixed_precision_step");
}

}  // namespace lab03
