/// @file labs/14_model_parallel/exercise.h
/// @brief Lab 14 exercise: the two halves of a Megatron tensor-parallel MLP (a linear layer split by its output
/// columns, then one split by its input rows: where each all-reduce goes, forward and backward) and the order of
/// operations of a 1F1B pipeline stage.
///
/// The lab (tensor_parallel.cpp) wraps the four linear functions in autograd functions and builds every GPT
/// block of a worker from them; the pipeline (pipeline.cpp) runs each stage's list of operations as
/// one_f_one_b_schedule() orders them. Stubs live in labs/14_model_parallel/exercise.cpp, the reference in
/// solutions/14_model_parallel/exercise.cpp.
#pragma once
#include <torch/torch.h>

#include <vector>

#include "common/workers/communicator.h"

namespace lab14 {

using speedlabs::workers::Communicator;  ///< the workers' collectives and the bytes they sent (common/workers)

/// What the backward of a linear layer y = x W^T + b returns on one worker.
struct LinearGrads {
  torch::Tensor input;   ///< dL/dx, the shape of x
  torch::Tensor weight;  ///< dL/dW of this worker's weight (its shard, or the whole weight)
  torch::Tensor bias;    ///< dL/db of this worker's bias (its shard, or the whole bias)
};

/// Forward of a column-parallel linear layer: worker r holds rows [r out/N, (r+1) out/N) of W (out, in) and of
/// b, i.e. the columns of the output it computes: y_r = x W_r^T + b_r, shape (..., out/N). Every worker has the
/// whole input x.
/// @param x            (..., in), the same on every worker
/// @param weight_shard (out/N, in)
/// @param bias_shard   (out/N)
torch::Tensor column_parallel_forward(const torch::Tensor& x, const torch::Tensor& weight_shard,
                                      const torch::Tensor& bias_shard);

/// Backward of column_parallel_forward(): from dL/dy_r (this worker's output columns), the gradients of this
/// worker's shards and dL/dx. Each worker's x fed every output column, so dL/dx is a sum over the workers of
/// their part: the result's `input` is that sum, the same on every worker.
/// @param x            the forward's input (..., in)
/// @param weight_shard (out/N, in)
/// @param grad_output  dL/dy_r (..., out/N)
/// @param comm         the tensor-parallel workers
LinearGrads column_parallel_backward(const torch::Tensor& x, const torch::Tensor& weight_shard,
                                     const torch::Tensor& grad_output, Communicator& comm);

/// Forward of a row-parallel linear layer: worker r holds columns [r in/N, (r+1) in/N) of W (out, in), the input
/// features it receives (x_r, the output of a column-parallel layer), and the whole bias b:
/// y = sum over workers of x_r W_r^T, plus b once, shape (..., out), the same on every worker.
/// @param x_shard      (..., in/N)
/// @param weight_shard (out, in/N)
/// @param bias         (out), the same on every worker
/// @param comm         the tensor-parallel workers
torch::Tensor row_parallel_forward(const torch::Tensor& x_shard, const torch::Tensor& weight_shard,
                                   const torch::Tensor& bias, Communicator& comm);

/// Backward of row_parallel_forward(): dL/dy is the same on every worker (y was), so every gradient here is
/// local: dL/dx_r, this worker's weight columns' gradient, and the whole bias's gradient.
/// @param x_shard      the forward's input (..., in/N)
/// @param weight_shard (out, in/N)
/// @param grad_output  dL/dy (..., out)
LinearGrads row_parallel_backward(const torch::Tensor& x_shard, const torch::Tensor& weight_shard,
                                  const torch::Tensor& grad_output);

/// One operation of a pipeline stage: the forward or the backward of one micro-batch.
struct PipeOp {
  /// Which pass of the micro-batch.
  enum Kind { forward, backward };
  Kind kind = forward;  ///< forward or backward
  int micro_batch = 0;  ///< 0 to M-1
  /// The same pass of the same micro-batch.
  bool operator==(const PipeOp& other) const { return kind == other.kind && micro_batch == other.micro_batch; }
};

/// The order in which stage @p stage of @p stages runs the forwards and backwards of @p micro_batches
/// micro-batches under 1F1B (one forward, one backward): first as many forwards as there are stages after it
/// (at most M), then, while forwards remain, one forward followed by one backward, then the remaining
/// backwards. Forwards and backwards each go in micro-batch order. Throws speedlabs::UsageError for
/// stages < 1, a stage outside [0, stages) or micro_batches < 1.
/// @param stage         this stage, 0 to stages-1
/// @param stages        N
/// @param micro_batches M
std::vector<PipeOp> one_f_one_b_schedule(int stage, int stages, int micro_batches);

}  // namespace lab14
