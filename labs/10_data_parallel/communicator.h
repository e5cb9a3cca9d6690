/// @file labs/10_data_parallel/communicator.h
/// @brief How a worker talks to the other workers: an all-reduce that starts now and is waited for later.
///
/// The exercise (on_gradient_ready, wait_for_gradients) uses only this interface, so the graded tests
/// can watch it work against a recording communicator in one process, and the lab runs it on MPI.
#pragma once
#include <torch/torch.h>


namespace lab10 {

/// The two collective calls a bucketed gradient all-reduce needs.
class Communicator {
 public:
  virtual ~Communicator() = default;
  /// This worker's number, 0 to size()-1.
  virtual int rank() const = 0;
  /// How many workers there are.
  virtual int size() const = 0;
  /// Starts summing @p flat over all workers, in place, and returns at once with a handle for wait().
  /// Until wait() returns, the caller must neither read nor write @p flat.
  /// @param flat a contiguous float32 CPU tensor; every worker passes one of the same size, in the same order
  /// @return the handle of the all-reduce in flight (0 or more)
  virtual int start_allreduce_sum(const torch::Tensor& flat) = 0;
  /// Blocks until the all-reduce @p handle is complete: its tensor then holds the sum over all workers.
  /// @param handle a value start_allreduce_sum() returned and no wait() has consumed yet
  virtual void wait(int handle) = 0;
  /// A blocking all-reduce of @p flat: start, then wait at once (naive data parallel, the benchmark).
  /// @param flat as for start_allreduce_sum()
  void allreduce_sum(const torch::Tensor& flat) { wait(start_allreduce_sum(flat)); }
};

}  // namespace lab10
