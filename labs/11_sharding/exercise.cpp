// Lab 11 exercise stubs: sharded training's bookkeeping and steps. Check your work with ./lab check 11
// (README.md, "The exercise").
#include "exercise.h"

#include "common/errors.h"
#include "zero.h"

namespace lab11 {

// Why: every worker must agree, without talking, on which elements of a flat buffer are its own. A
// reduce-scatter and an all-gather cut a buffer into N equal slices, so the buffer is padded (with zeros
// that stay zero) until N divides it, and slice r is worker r's.
ShardRange shard_range(int64_t /*numel*/, int /*rank*/, int /*workers*/) {
  // TODO(lab11): reject workers < 1, rank outside [0, workers) and numel < 0 (speedlabs::UsageError). Round
  // numel up to a multiple of workers (padded), shard_size = padded / workers, begin = rank * shard_size,
  // end = begin + shard_size but at most numel, and never below begin (a last worker may own padding only).
  speedlabs::not_implemented("11", "11_sharding", "shard_range");
}

// Why: AdamW keeps two float32 moments per parameter, twice the weights' bytes: lab 08 measured them as
// the largest part of training's state. Each element's update reads only that element's weight, gradient
// and moments, so a worker can update its slice alone, with moments only for that slice (ZeRO stage 1).
void sharded_adamw_step(const torch::Tensor& /*param_shard*/, const torch::Tensor& /*grad_shard*/,
                        AdamWShard& /*state*/, const AdamWSettings& /*settings*/) {
  // TODO(lab11): under torch::NoGradGuard: on the first call make exp_avg and exp_avg_sq zeros like the
  // shard. Then, as torch::optim::AdamW does: step += 1; p *= 1 - lr * weight_decay;
  // exp_avg = beta1 * exp_avg + (1 - beta1) * g; exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g;
  // p -= lr / (1 - beta1^step) * exp_avg / (sqrt(exp_avg_sq) / sqrt(1 - beta2^step) + eps).
  // All in place on the shard (mul_, add_, addcmul_, addcdiv_): it is a view into the model's weights.
  speedlabs::not_implemented("11", "11_sharding", "sharded_adamw_step");
}

// Why: at stage 3 a worker keeps 1/N of the weights at rest. A block needs all of its weights for its
// forward and again for its backward, so just before each it gathers them from the other workers.
void gather_full_parameters(FlatUnit& /*unit*/, Communicator& /*comm*/) {
  // TODO(lab11): allocate_full_storage(unit.full) (zero.h) gives the flat buffer its bytes back; copy
  // unit.shard into unit.full's slice starting at unit.range.begin (narrow, copy_), then
  // comm.all_gather_into(unit.full) fills the other workers' slices.
  speedlabs::not_implemented("11", "11_sharding", "gather_full_parameters");
}

// Why: the gathered weights are only needed while the block runs; keeping them would bring back the
// memory stage 3 saves. Autograd's graph still refers to them, by storage, until the next gather refills it.
void free_full_parameters(FlatUnit& /*unit*/) {
  // TODO(lab11): release_full_storage(unit.full) (zero.h).
  speedlabs::not_implemented("11", "11_sharding", "free_full_parameters");
}

}  // namespace lab11
