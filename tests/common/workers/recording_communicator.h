/// @file tests/common/workers/recording_communicator.h
/// @brief A Communicator in one process for the tests: it records every all-reduce started and, when
/// one is waited for, adds what the other workers would have sent.
#pragma once
#include <gtest/gtest.h>
#include <torch/types.h>

#include <string>
#include <vector>

#include "common/workers/communicator.h"

namespace speedlabs::workers::testing {

/// Pretends to be rank 0 of @p size workers, the others holding `peer_factor` times this worker's
/// gradients: a sum then equals (1 + (size - 1) * peer_factor) times the buffer as it was at the start.
/// Its all-gather fills every other worker's slice with `peer_factor` times this worker's slice.
class RecordingCommunicator : public Communicator {
 public:
  /// @param size        how many workers it pretends there are
  /// @param peer_factor each other worker's gradients relative to this one's
  explicit RecordingCommunicator(int size = 2, double peer_factor = 3.0) : size_(size), peer_factor_(peer_factor) {}

  int rank() const override { return 0; }
  int size() const override { return size_; }

  int start_allreduce_sum(const torch::Tensor& flat) override {
    started.push_back({flat, flat.clone(), false});
    return static_cast<int>(started.size()) - 1;
  }

  void wait(int handle) override {
    if (handle < 0 || handle >= static_cast<int>(started.size()) || started[handle].waited) {
      throw std::logic_error("wait(" + std::to_string(handle) + "): no all-reduce in flight has this handle");
    }
    Start& start = started[handle];
    start.flat.add_(start.at_start * ((size_ - 1) * peer_factor_));
    start.waited = true;
    ++waits;
  }

  void reduce_scatter_sum(const torch::Tensor& full, const torch::Tensor& shard) override {
    ASSERT_EQ(full.numel(), shard.numel() * size_) << "reduce_scatter_sum: the full buffer is not size() shards";
    shard.copy_(sum_of(full.narrow(0, 0, shard.numel())));
    count_ring_bytes(full.numel() * 4, 1);
    ++reduce_scatters;
  }

  void all_gather_into(const torch::Tensor& full) override {
    ASSERT_EQ(full.numel() % size_, 0) << "all_gather_into: the buffer does not split over size() workers";
    const int64_t slice = full.numel() / size_;
    gathered.push_back(full.narrow(0, 0, slice).clone());  // this worker's slice, as it was sent
    for (int r = 1; r < size_; ++r) full.narrow(0, r * slice, slice).copy_(gathered.back() * peer_factor_);
    count_ring_bytes(full.numel() * 4, 1);
  }

  /// The sum an all-reduce of @p mine gives with these pretend workers.
  torch::Tensor sum_of(const torch::Tensor& mine) const { return mine * (1 + (size_ - 1) * peer_factor_); }

  /// One all-reduce started.
  struct Start {
    torch::Tensor flat;      ///< the buffer passed (shared with the caller)
    torch::Tensor at_start;  ///< a copy of it when the all-reduce started
    bool waited = false;     ///< wait() was called for it
  };
  std::vector<Start> started;           ///< every start, in order; the handle is the index
  int waits = 0;                        ///< wait() calls
  int reduce_scatters = 0;              ///< reduce_scatter_sum() calls
  std::vector<torch::Tensor> gathered;  ///< what each all_gather_into() sent: this worker's slice

 private:
  int size_;
  double peer_factor_;
};

}  // namespace speedlabs::workers::testing
