// Lab 06 reference solutions.
#include "exercise.h"

#include <cmath>

namespace lab06 {

void foreach_adamw_update(AdamWTensors& t, double lr, const AdamWHyperparameters& hyper) {
  // The op sequence of torch.optim.adam._multi_tensor_adam (decoupled weight decay, not capturable),
  // so that the C++ and Python eager runs do the same arithmetic with the same kernels.
  at::_foreach_add_(t.steps, 1.0);
  at::_foreach_mul_(t.params, 1.0 - lr * hyper.weight_decay);
  at::_foreach_lerp_(t.exp_avgs, t.grads, 1.0 - hyper.beta1);
  at::_foreach_mul_(t.exp_avg_sqs, hyper.beta2);
  at::_foreach_addcmul_(t.exp_avg_sqs, t.grads, t.grads, 1.0 - hyper.beta2);
  std::vector<c10::Scalar> step_sizes, bias_correction2_sqrts;
  for (const auto& count : t.steps) {
    const double step = count.item<double>();  // a CPU tensor: no device synchronization
    step_sizes.emplace_back(-lr / (1.0 - std::pow(hyper.beta1, step)));
    bias_correction2_sqrts.emplace_back(std::sqrt(1.0 - std::pow(hyper.beta2, step)));
  }
  auto denominators = at::_foreach_sqrt(t.exp_avg_sqs);
  at::_foreach_div_(denominators, bias_correction2_sqrts);
  at::_foreach_add_(denominators, hyper.eps);
  at::_foreach_addcdiv_(t.params, t.exp_avgs, denominators, step_sizes);
}

void fused_adamw_update(AdamWTensors& tensors, const torch::Tensor& lr, const AdamWHyperparameters& hyper) {
  // The counts stay on the device: a host-side `step += 1` would be baked into a captured graph as a constant.
  at::_foreach_add_(tensors.steps, 1.0);
  at::_fused_adamw_(tensors.params, tensors.grads, tensors.exp_avgs, tensors.exp_avg_sqs, /*max_exp_avg_sqs=*/{},
                    tensors.steps, lr, hyper.beta1, hyper.beta2, hyper.weight_decay, hyper.eps,
                    /*amsgrad=*/false, /*maximize=*/false);
}

#ifdef SPEEDLABS_TORCH_HAS_CUDA
torch::Tensor capture_train_step(at::cuda::CUDAGraph& graph, const std::function<torch::Tensor()>& step,
                                 torch::optim::Optimizer& optimizer) {
  optimizer.zero_grad();  // the captured backward allocates the gradients in the graph's pool
  graph.capture_begin();
  torch::Tensor loss;
  try {
    loss = step();
  } catch (const c10::Error&) {
    // An op that cannot be captured leaves the stream capturing and the allocator filling the graph's
    // pool; ending the capture, failed as it is, restores both.
    try {
      graph.capture_end();
    } catch (const c10::Error&) {  // "capture invalidated": the error being rethrown says why
    }
    throw;
  }
  graph.capture_end();
  return loss;
}
#endif

}  // namespace lab06
