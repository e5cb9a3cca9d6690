/// @file common/workers/communicator.h
/// @brief How a worker talks to the other workers: an all-reduce that starts now and is waited for later,
/// and the two halves of a ring all-reduce on their own (reduce-scatter, all-gather) that lab 11's sharding uses.
///
/// The exercises (lab 10's on_gradient_ready, wait_for_gradients; lab 11's gather of a sharded unit) use only
/// this interface, so the graded tests can watch them work against a recording communicator in one process,
/// and the labs run them on MPI (NCCL between GPUs).
#pragma once
#include <torch/types.h>

#include <cstdint>

namespace speedlabs::workers {

/// The collective calls of data parallel (an all-reduce started now, waited for later) and of sharded
/// training (reduce-scatter, all-gather), and the bytes they sent.
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

  /// Sums @p full over all workers and leaves on this worker only its slice of the sum: shard[i] = the sum
  /// over workers of full[rank() * s + i], s = shard.numel(). Blocking: it returns with the shard complete.
  /// @param full  contiguous float32, size() * s elements, the same size on every worker (not changed)
  /// @param shard contiguous float32, s elements: receives this worker's slice of the sum
  virtual void reduce_scatter_sum(const torch::Tensor& full, const torch::Tensor& shard) = 0;
  /// In place: worker r's slice full[r * s, (r + 1) * s) (s = full.numel() / size()) is copied to every
  /// worker, so that afterwards every worker's @p full holds every slice. Blocking.
  /// @param full contiguous float32, a multiple of size() elements, the same size on every worker
  virtual void all_gather_into(const torch::Tensor& full) = 0;

  /// Bytes this worker sent in the collectives above since it was made, counted as a ring sends them: a
  /// reduce-scatter or an all-gather of a B-byte buffer sends (N-1)/N x B per worker (N-1 steps of one
  /// chunk of B/N), an all-reduce both, 2 (N-1)/N x B. Control messages (losses, checksums) are not counted.
  int64_t bytes_sent() const { return bytes_sent_; }

 protected:
  /// Counts @p passes ring passes (1: reduce-scatter or all-gather, 2: all-reduce) over @p buffer_bytes.
  /// @param buffer_bytes the whole buffer's bytes (every worker's slices together)
  /// @param passes       1 or 2
  void count_ring_bytes(int64_t buffer_bytes, int passes) {
    bytes_sent_ += passes * (size() - 1) * buffer_bytes / size();
  }

 private:
  int64_t bytes_sent_ = 0;
};

}  // namespace speedlabs::workers
