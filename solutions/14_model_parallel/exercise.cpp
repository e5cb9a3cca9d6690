// Lab 14 reference: the column- and row-parallel linear layers of a Megatron block, and the 1F1B order.
#include "exercise.h"

#include <algorithm>
#include <string>

#include "common/errors.h"

namespace lab14 {

namespace {

// x (..., in) and g (..., out) as matrices of rows: the weight's gradient is g^T x, the bias's the sum of g's rows.
LinearGrads local_linear_backward(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& grad) {
  const auto x2 = x.reshape({-1, x.size(-1)});
  const auto g2 = grad.reshape({-1, grad.size(-1)});
  LinearGrads out;
  out.weight = g2.t().mm(x2);
  out.bias = g2.sum(0);
  out.input = grad.matmul(weight);
  return out;
}

}  // namespace

torch::Tensor column_parallel_forward(const torch::Tensor& x, const torch::Tensor& weight_shard,
                                      const torch::Tensor& bias_shard) {
  return torch::nn::functional::linear(x, weight_shard, bias_shard);  // no communication: x is everyone's
}

LinearGrads column_parallel_backward(const torch::Tensor& x, const torch::Tensor& weight_shard,
                                     const torch::Tensor& grad_output, Communicator& comm) {
  LinearGrads out = local_linear_backward(x, weight_shard, grad_output);
  out.input = out.input.contiguous();
  comm.allreduce_sum(out.input);  // each worker's columns contributed a part of dL/dx
  return out;
}

torch::Tensor row_parallel_forward(const torch::Tensor& x_shard, const torch::Tensor& weight_shard,
                                   const torch::Tensor& bias, Communicator& comm) {
  auto partial = torch::nn::functional::linear(x_shard, weight_shard).contiguous();
  comm.allreduce_sum(partial);  // each worker's input features gave a partial sum of every output
  return partial + bias;        // the bias once, after the sum
}

LinearGrads row_parallel_backward(const torch::Tensor& x_shard, const torch::Tensor& weight_shard,
                                  const torch::Tensor& grad_output) {
  return local_linear_backward(x_shard, weight_shard, grad_output);
}

std::vector<PipeOp> one_f_one_b_schedule(int stage, int stages, int micro_batches) {
  if (stages < 1 || stage < 0 || stage >= stages || micro_batches < 1) {
    throw speedlabs::UsageError("one_f_one_b_schedule: stage " + std::to_string(stage) + " of " +
                                std::to_string(stages) + " stages, " + std::to_string(micro_batches) +
                                " micro-batches");
  }
  const int warmup = std::min(stages - stage - 1, micro_batches);
  std::vector<PipeOp> ops;
  int forwards = 0, backwards = 0;
  for (; forwards < warmup; ++forwards) ops.push_back({PipeOp::forward, forwards});
  while (forwards < micro_batches) {
    ops.push_back({PipeOp::forward, forwards++});
    ops.push_back({PipeOp::backward, backwards++});
  }
  while (backwards < micro_batches) ops.push_back({PipeOp::backward, backwards++});
  return ops;
}

}  // namespace lab14
