// Lab 06 exercise stubs: replace each body, then run ./lab test (see README.md).
#include "exercise.h"

#include "common/errors.h"

namespace lab06 {

int64_t padded_vocab_size(int64_t /*vocab_size*/, int64_t /*multiple*/) {
  // TODO(lab06): round vocab_size up to the next multiple (reject sizes that are not positive).
  speedlabs::not_implemented("06", "06_compile_ahead", "padded_vocab_size");
}

void fused_adamw_update(FusedAdamWTensors& /*tensors*/, const torch::Tensor& /*lr*/,
                        const AdamWHyperparameters& /*hyper*/) {
  // TODO(lab06): bump the step counts on the device, then one at::_fused_adamw_ call with the lr tensor.
  speedlabs::not_implemented("06", "06_compile_ahead", "fused_adamw_update");
}

}  // namespace lab06
