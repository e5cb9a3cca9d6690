/// @file tests/lab10/recording_communicator.h
/// @brief A Communicator in one process for the tests: it records every all-reduce started and, when
/// one is waited for, adds what the other workers would have sent.
#pragma once
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "communicator.h"

namespace lab10::testing {

/// Pretends to be rank 0 of @p size workers, the others holding `peer_factor` times this worker's
/// gradients: a sum then equals (1 + (size - 1) * peer_factor) times the buffer as it was at the start.
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

  /// The sum an all-reduce of @p mine gives with these pretend workers.
  torch::Tensor sum_of(const torch::Tensor& mine) const { return mine * (1 + (size_ - 1) * peer_factor_); }

  /// One all-reduce started.
  struct Start {
    torch::Tensor flat;      ///< the buffer passed (shared with the caller)
    torch::Tensor at_start;  ///< a copy of it when the all-reduce started
    bool waited = false;     ///< wait() was called for it
  };
  std::vector<Start> started;  ///< every start, in order; the handle is the index
  int waits = 0;               ///< wait() calls

 private:
  int size_;
  double peer_factor_;
};

}  // namespace lab10::testing
