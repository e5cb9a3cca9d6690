// Lab 11 reference solution: shard bookkeeping, the sharded AdamW step, stage 3's gather and release.
#include "exercise.h"

#include <cmath>
#include <string>

#include "common/errors.h"
#include "zero.h"

namespace lab11 {

ShardRange shard_range(int64_t numel, int rank, int workers) {
  if (workers < 1 || rank < 0 || rank >= workers || numel < 0) {
    throw speedlabs::UsageError("shard_range: rank " + std::to_string(rank) + " of " + std::to_string(workers) +
                                " workers, " + std::to_string(numel) + " elements");
  }
  ShardRange range;
  range.numel = numel;
  range.padded = (numel + workers - 1) / workers * workers;
  range.shard_size = range.padded / workers;
  range.begin = rank * range.shard_size;
  range.end = std::max(range.begin, std::min(range.begin + range.shard_size, numel));
  return range;
}

void sharded_adamw_step(const torch::Tensor& param_shard, const torch::Tensor& grad_shard, AdamWShard& state,
                        const AdamWSettings& s) {
  torch::NoGradGuard no_grad;
  if (!state.exp_avg.defined()) {
    state.exp_avg = torch::zeros_like(param_shard);
    state.exp_avg_sq = torch::zeros_like(param_shard);
  }
  ++state.step;
  auto p = param_shard;  // a handle on the same elements
  p.mul_(1 - s.lr * s.weight_decay);
  state.exp_avg.mul_(s.beta1).add_(grad_shard, 1 - s.beta1);
  state.exp_avg_sq.mul_(s.beta2).addcmul_(grad_shard, grad_shard, 1 - s.beta2);
  const double bias_correction1 = 1 - std::pow(s.beta1, static_cast<double>(state.step));
  const double bias_correction2 = 1 - std::pow(s.beta2, static_cast<double>(state.step));
  const auto denom = (state.exp_avg_sq.sqrt() / std::sqrt(bias_correction2)).add_(s.eps);
  p.addcdiv_(state.exp_avg, denom, -s.lr / bias_correction1);
}

void gather_full_parameters(FlatUnit& unit, Communicator& comm) {
  allocate_full_storage(unit.full);
  unit.full.narrow(0, unit.range.begin, unit.range.shard_size).copy_(unit.shard);
  comm.all_gather_into(unit.full);
}

void free_full_parameters(FlatUnit& unit) { release_full_storage(unit.full); }

}  // namespace lab11
