// Lab 14 exercise stubs: the tensor-parallel linear layers and the 1F1B order. Check your work with
// ./lab check 14 (README.md, "The exercise").
#include "exercise.h"

#include "common/errors.h"

namespace lab14 {

// Why: split W by its output rows and each worker computes a slice of y's columns from the whole x, with no
// message at all; the GELU after it works column by column, so it runs on the slice as it is.
torch::Tensor column_parallel_forward(const torch::Tensor& /*x*/, const torch::Tensor& /*weight_shard*/,
                                      const torch::Tensor& /*bias_shard*/) {
  // TODO(lab14): y_r = x W_r^T + b_r (torch::nn::functional::linear). No communication.
  speedlabs::not_implemented("14", "14_model_parallel", "column_parallel_forward");
}

// Why: every output column used all of x, so each worker's backward gives only its columns' share of
// dL/dx; the layer before needs the whole of it, on every worker: this is the all-reduce of the backward pass.
LinearGrads column_parallel_backward(const torch::Tensor& /*x*/, const torch::Tensor& /*weight_shard*/,
                                     const torch::Tensor& /*grad_output*/, Communicator& /*comm*/) {
  // TODO(lab14): with x and g = grad_output as matrices of rows (reshape({-1, last dim})): weight = g^T x,
  // bias = the sum of g's rows, input = grad_output.matmul(W_r). Make input contiguous and sum it over the
  // workers in place (comm.allreduce_sum). The weight and bias gradients stay local: they are this worker's.
  speedlabs::not_implemented("14", "14_model_parallel", "column_parallel_backward");
}

// Why: split W by its input columns and each worker, holding only its slice of the features, computes a
// partial sum of every output; the residual stream after the layer needs the whole sum: this is the
// all-reduce of the forward pass.
torch::Tensor row_parallel_forward(const torch::Tensor& /*x_shard*/, const torch::Tensor& /*weight_shard*/,
                                   const torch::Tensor& /*bias*/, Communicator& /*comm*/) {
  // TODO(lab14): partial = x_r W_r^T without the bias (contiguous), comm.allreduce_sum(partial), then add the
  // bias once: adding it on every worker before the sum would count it N times.
  speedlabs::not_implemented("14", "14_model_parallel", "row_parallel_forward");
}

// Why: y and so dL/dy are the same on every worker; dL/dx_r needs only this worker's columns of W. No message.
LinearGrads row_parallel_backward(const torch::Tensor& /*x_shard*/, const torch::Tensor& /*weight_shard*/,
                                  const torch::Tensor& /*grad_output*/) {
  // TODO(lab14): as column_parallel_backward's three formulas, with x_r and W_r, and no all-reduce.
  speedlabs::not_implemented("14", "14_model_parallel", "row_parallel_backward");
}

// Why: GPipe runs all M forwards first and so holds M micro-batches' activations until the backwards start.
// 1F1B starts a micro-batch's backward as soon as the last stage can, so a stage never holds more than the
// micro-batches in flight after it: at most N, whatever M is. The bubble stays the same.
std::vector<PipeOp> one_f_one_b_schedule(int /*stage*/, int /*stages*/, int /*micro_batches*/) {
  // TODO(lab14): reject stages < 1, stage outside [0, stages) and micro_batches < 1 (speedlabs::UsageError).
  // warmup = min(stages - stage - 1, micro_batches) forwards; then, while forwards remain, {forward, backward};
  // then the remaining backwards. Forwards and backwards each count up from micro-batch 0.
  speedlabs::not_implemented("14", "14_model_parallel", "one_f_one_b_schedule");
}

}  // namespace lab14
