/// @file tests/support/one_process_communicator.h
/// @brief The base of the tests' Communicators that stand in for other workers inside one process: rank and
/// size as given, and every collective refused. A fake overrides the collectives its exercise makes; a call
/// to any other fails with a message naming it, since the exercise had no reason to make it.
#pragma once
#include <torch/types.h>

#include <string>
#include <utility>

#include "common/errors.h"
#include "common/workers/communicator.h"

namespace speedlabs::testing {

class OneProcessCommunicator : public workers::Communicator {
 public:
  /// @param who  what stands behind the exercise's calls, for the messages ("lab 10's backward")
  OneProcessCommunicator(int rank, int size, std::string who) : rank_(rank), size_(size), who_(std::move(who)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int start_allreduce_sum(const torch::Tensor&) override { refuse("all-reduce"); }
  void wait(int) override { refuse("wait"); }
  void reduce_scatter_sum(const torch::Tensor&, const torch::Tensor&) override { refuse("reduce-scatter"); }
  void all_gather_into(const torch::Tensor&) override { refuse("all-gather"); }

 protected:
  [[noreturn]] void refuse(const std::string& collective) const {
    throw RuntimeFailure(who_ + " needs no " + collective);
  }

 private:
  int rank_, size_;
  std::string who_;
};

}  // namespace speedlabs::testing
