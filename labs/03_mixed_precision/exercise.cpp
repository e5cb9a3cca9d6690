// Lab 03 exercise stubs: replace each body, then run ./lab test 03 (see README.md).
#include "exercise.h"

#include "common/errors.h"

namespace lab03 {

torch::Tensor unscale_and_check(const std::vector<torch::Tensor>& /*grads*/, double /*inv_scale*/) {
  // TODO(lab03): find non-finite elements (torch::isfinite), multiply each gradient by inv_scale in place,
  // and return the flag as a 0-dim float32 tensor, without calling .item().
  speedlabs::not_implemented("03", "03_mixed_precision", "unscale_and_check");
}

ScaleState next_scale_state(const ScaleState& /*current*/, bool /*found_inf*/, const ScaleRule& /*rule*/) {
  // TODO(lab03): back off on inf/NaN; otherwise count the clean iteration and grow at growth_interval.
  speedlabs::not_implemented("03", "03_mixed_precision", "next_scale_state");
}

StepResult mixed_precision_step(const std::function<torch::Tensor()>& /*compute_loss*/,
                                torch::optim::Optimizer& /*optimizer*/, speedlabs::GradScaler& /*scaler*/,
                                c10::DeviceType /*device_type*/, c10::ScalarType /*dtype*/) {
  // TODO(lab03): zero_grad; the forward under a speedlabs::AutocastGuard; scaler.scale(loss).backward()
  // after the guard's scope; scaler.step(optimizer); scaler.update().
  speedlabs::not_implemented("03", "03_mixed_precision", "mixed_precision_step");
}

}  // namespace lab03
