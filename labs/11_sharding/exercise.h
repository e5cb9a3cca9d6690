/// @file labs/11_sharding/exercise.h
/// @brief Lab 11 exercise: the bookkeeping and the steps of sharded (ZeRO / FSDP) training.
///
/// The model's parameters live in flat units (the embeddings and final LayerNorm, then one unit per
/// transformer block), each padded so that N workers divide it; worker r owns slice r of every unit. What a
/// student writes: which slice a worker owns (shard_range), AdamW on that slice only (sharded_adamw_step),
/// and, for stage 3, the all-gather of a unit's full parameters before it is used and their release after
/// (gather_full_parameters, free_full_parameters). The lab (zero.cpp) calls them around each block.
///
/// Stubs live in labs/11_sharding/exercise.cpp, the reference in solutions/11_sharding/exercise.cpp.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "common/workers/communicator.h"

namespace lab11 {

using speedlabs::workers::Communicator;  ///< the workers' collectives and the bytes they sent (common/workers)

/// Which part of a flat buffer of `numel` elements one worker owns, once padded so the workers divide it.
struct ShardRange {
  int64_t numel = 0;       ///< elements before padding
  int64_t padded = 0;      ///< numel rounded up to a multiple of the number of workers
  int64_t shard_size = 0;  ///< padded / workers: every worker's shard has this size
  int64_t begin = 0;       ///< this worker's first element: rank * shard_size
  int64_t end = 0;         ///< one past its last real element: min(begin + shard_size, numel), never below begin
};

/// Splits a flat buffer of @p numel elements over @p workers workers: every worker gets the same
/// shard_size (the buffer padded with zeros up to a multiple of @p workers), worker @p rank the slice
/// [rank * shard_size, (rank + 1) * shard_size). The last shards may hold padding only past `end`.
/// Throws speedlabs::UsageError for workers < 1, a rank outside [0, workers) or numel < 0.
/// @param numel   elements of the buffer
/// @param rank    the worker
/// @param workers N
ShardRange shard_range(int64_t numel, int rank, int workers);

/// AdamW's hyperparameters (torch::optim::AdamW's, as common/gpt's make_adamw sets them).
struct AdamWSettings {
  double lr = 1e-3;            ///< learning rate
  double beta1 = 0.9;          ///< decay of the first moment
  double beta2 = 0.999;        ///< decay of the second moment
  double eps = 1e-8;           ///< added to the root of the second moment
  double weight_decay = 0.01;  ///< decoupled: the weights shrink by lr x weight_decay each step
};

/// AdamW's state for one shard: the two moments, only as long as the shard.
struct AdamWShard {
  torch::Tensor exp_avg;     ///< first moment (undefined until the first step)
  torch::Tensor exp_avg_sq;  ///< second moment (undefined until the first step)
  int64_t step = 0;          ///< steps taken
};

/// One AdamW step on a shard, exactly torch::optim::AdamW's arithmetic on those elements: decoupled
/// weight decay, the two moments, bias corrections. Creates the moments (zeros like @p param_shard) on the
/// first call: a worker's optimizer state is then its shard's size, 1/N of the model's.
/// @param param_shard the worker's slice of the flat parameters, updated in place
/// @param grad_shard  the averaged gradient of the same slice
/// @param state       the shard's moments and step count
/// @param settings    the hyperparameters
void sharded_adamw_step(const torch::Tensor& param_shard, const torch::Tensor& grad_shard, AdamWShard& state,
                        const AdamWSettings& settings);

/// A flat unit: some parameters stored one after the other in one padded buffer, and this worker's shard.
struct FlatUnit {
  std::vector<torch::Tensor> params;  ///< the model's parameters, views of `full` (autograd leaves)
  std::vector<int64_t> offsets;       ///< where each parameter starts in `full`
  torch::Tensor full;                 ///< float32, range.padded elements; at stage 3 its storage is empty at rest
  torch::Tensor shard;                ///< this worker's range.shard_size elements: a view of `full` (stages 0-2) or,
                                      ///< at stage 3, a tensor of its own, the only copy a worker keeps at rest
  ShardRange range;                   ///< which slice of `full` is this worker's
  int rank = 0;                       ///< this worker
};

/// Stage 3, before a unit is used (its forward, and again its backward): gives `unit.full` its bytes back
/// (allocate_full_storage in zero.h), puts this worker's shard in its slice, and all-gathers every worker's
/// slice (Communicator::all_gather_into), so that the unit's parameters (views of `full`) hold the whole
/// model's values again.
/// @param unit the unit, at rest (full has no storage) or already gathered (then gathered again)
/// @param comm the workers
void gather_full_parameters(FlatUnit& unit, Communicator& comm);

/// Stage 3, after a unit was used: gives the bytes of `unit.full` back (release_full_storage in zero.h), so
/// that only the shard stays. The parameters keep their shapes and their place in autograd's graph; their
/// values are gone until the next gather_full_parameters().
/// @param unit the unit, gathered
void free_full_parameters(FlatUnit& unit);

}  // namespace lab11
