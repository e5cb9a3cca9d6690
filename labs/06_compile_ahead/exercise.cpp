// Lab 06 exercise: AdamW over every parameter at once, and the training step captured in a CUDA graph.
//
// Replace each stub below; the comment above each TODO says why the function exists and how to write it.
// The declarations and their full contracts are in exercise.h; the lesson is README.md ("The exercise").
// Check your work with ./lab check 06.
#include "exercise.h"

#include <cmath>

#include "common/errors.h"

namespace lab06 {

// Why: libtorch's torch::optim::AdamW updates one tensor at a time, about ten small kernels for each of
// GPT-2's 148 tensors. Python's AdamW on a GPU runs each line of the formula once over all tensors
// (foreach). The ladder's eager rungs use your function, so C++ and Python are compared on equal terms.
// Hints:
// - at::_foreach_add_(t.steps, 1.0) counts the step; the counts are CPU tensors, so reading them with
//   .item<double>() costs no device synchronisation.
// - The formula is in exercise.h; in ops: _foreach_mul_ (weight decay, then beta2 on exp_avg_sqs),
//   _foreach_lerp_ (exp_avgs towards grads by 1 - beta1), _foreach_addcmul_ (grads * grads into
//   exp_avg_sqs), _foreach_sqrt, _foreach_div_ and _foreach_add_ for the denominators, and one
//   _foreach_addcdiv_ into the params.
// - The bias corrections differ per parameter only through its step count: build one std::vector<c10::Scalar>
//   of step sizes (-lr / (1 - beta1^t)) and one of sqrt(1 - beta2^t), and pass them to the list overloads.
void foreach_adamw_update(AdamWTensors& /*tensors*/, double /*lr*/, const AdamWHyperparameters& /*hyper*/) {
  // TODO(lab06): one AdamW step over all parameters with Python's foreach op sequence.
  speedlabs::not_implemented("06", "06_compile_ahead", "foreach_adamw_update");
}

// Why: even foreach AdamW launches about ten kernels and computes its bias corrections on the host. The
// fused kernel does the whole update in one launch, and with the step counts and the learning rate in
// device memory the step never waits for the host, which is what lets a CUDA graph capture it.
// Hints:
// - at::_foreach_add_(tensors.steps, 1.0): the counts live on the device here, and must be counted there
//   (a host-side count would be frozen into a captured graph).
// - Then one at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, lr,
//   beta1, beta2, weight_decay, eps, /*amsgrad=*/false, /*maximize=*/false): the overload that takes lr as a
//   tensor.
void fused_adamw_update(AdamWTensors& /*tensors*/, const torch::Tensor& /*lr*/, const AdamWHyperparameters& /*hyper*/) {
  // TODO(lab06): bump the step counts on the device, then one at::_fused_adamw_ call with the lr tensor.
  speedlabs::not_implemented("06", "06_compile_ahead", "fused_adamw_update");
}

#ifdef SPEEDLABS_TORCH_HAS_CUDA
// Why: at a small batch a GPU finishes each kernel before the host has launched the next one. A CUDA graph
// records every launch of a step once; graph.replay() then launches them all in one call.
// Hints:
// - optimizer.zero_grad() first: with the gradients gone, the captured backward allocates new ones from the
//   graph's memory pool, at addresses every replay reuses.
// - graph.capture_begin(); loss = step(); graph.capture_end(); return loss.
// - If step() throws a c10::Error, call graph.capture_end() (catching the c10::Error it throws in turn)
//   and rethrow the first error: otherwise the stream stays in capture mode and the rest of the run fails.
torch::Tensor capture_train_step(at::cuda::CUDAGraph& /*graph*/, const std::function<torch::Tensor()>& /*step*/,
                                 torch::optim::Optimizer& /*optimizer*/) {
  // TODO(lab06): record one training step into the graph and return its loss tensor.
  speedlabs::not_implemented("06", "06_compile_ahead", "capture_train_step");
}
#endif

}  // namespace lab06
