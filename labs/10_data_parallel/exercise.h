/// @file labs/10_data_parallel/exercise.h
/// @brief Lab 10 exercise: the bucketed, overlapped gradient all-reduce of data-parallel training.
///
/// During backward, each parameter's gradient is copied into its bucket as soon as autograd has it
/// (on_gradient_ready, called from a gradient hook); the moment a bucket is full its all-reduce starts,
/// while backward goes on computing the gradients of earlier layers. Before the optimizer step,
/// wait_for_gradients waits for every bucket and hands each parameter its averaged gradient.
///
/// Stubs live in labs/10_data_parallel/exercise.cpp, the reference in solutions/10_data_parallel/exercise.cpp.
#pragma once
#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/workers/communicator.h"

namespace lab10 {

using speedlabs::workers::Communicator;  ///< the workers' collectives and the bytes they sent (common/workers)

/// Some parameters whose gradients travel together in one all-reduce.
struct Bucket {
  torch::Tensor flat;          ///< float32, 1-D: the gradients of params, one after the other
  std::vector<size_t> params;  ///< the parameters in this bucket (indices into GradientBuckets::params)
  size_t ready = 0;            ///< how many of them have been copied into flat in this step
  int handle = -1;             ///< the all-reduce in flight (Communicator::start_allreduce_sum), -1 when none
};

/// Where every gradient goes, and the buckets' state during one step (make_gradient_buckets builds it).
struct GradientBuckets {
  std::vector<torch::Tensor> params;  ///< the model's parameters
  std::vector<size_t> bucket_of;      ///< parameter index -> its bucket
  std::vector<int64_t> offset_of;     ///< parameter index -> where its gradient starts in its bucket's flat
  std::vector<Bucket> buckets;        ///< in the order their gradients are expected during backward
  Communicator* comm = nullptr;       ///< who the gradients are summed with
};

/// The gradient hook: copies parameter @p param's gradient into its bucket and, when that was the
/// bucket's last missing gradient, starts the bucket's all-reduce (sum) at once, without waiting for it.
///
/// Called by autograd during backward, once per parameter and step, in the order gradients become
/// ready (roughly the reverse of the forward pass). Starting each bucket as soon as it is full is what
/// lets communication overlap the rest of backward; waiting here would serialise them again.
/// @param buckets the layout and state; the bucket's `ready` count and `handle` are updated
/// @param param   the index of the parameter whose gradient is ready
/// @param grad    its gradient, the shape of the parameter
void on_gradient_ready(GradientBuckets& buckets, size_t param, const torch::Tensor& grad);

/// The wait before the optimizer step: waits for every bucket's all-reduce, sets each parameter's
/// `.grad` to the average over the workers (the sum divided by the number of workers), and makes the
/// buckets ready for the next step (ready = 0, handle = -1).
///
/// Throws speedlabs::RuntimeFailure naming the bucket when a bucket's all-reduce never started (a
/// parameter got no gradient in this step): its all-reduce cannot be waited for, and the other workers
/// would wait for it forever.
/// @param buckets the layout and state after backward
void wait_for_gradients(GradientBuckets& buckets);

}  // namespace lab10
