// Lab 06 reference solutions.
#include "exercise.h"

#include <string>

#include "common/errors.h"

namespace lab06 {

int64_t padded_vocab_size(int64_t vocab_size, int64_t multiple) {
  if (vocab_size <= 0 || multiple <= 0) {
    throw speedlabs::UsageError("padded_vocab_size: vocab_size (" + std::to_string(vocab_size) + ") and multiple (" +
                                std::to_string(multiple) + ") must be positive");
  }
  return (vocab_size + multiple - 1) / multiple * multiple;
}

void fused_adamw_update(FusedAdamWTensors& tensors, const torch::Tensor& lr, const AdamWHyperparameters& hyper) {
  // The counts stay on the device: a host-side `step += 1` would be baked into a captured graph as a constant.
  at::_foreach_add_(tensors.steps, 1.0);
  at::_fused_adamw_(tensors.params, tensors.grads, tensors.exp_avgs, tensors.exp_avg_sqs, /*max_exp_avg_sqs=*/{},
                    tensors.steps, lr, hyper.beta1, hyper.beta2, hyper.weight_decay, hyper.eps,
                    /*amsgrad=*/false, /*maximize=*/false);
}

}  // namespace lab06
