/// @file common/workers/nccl_communicator.h
/// @brief The GPU engine: the Communicator on NCCL, one GPU per worker, bootstrapped over MPI.
///
/// Compiled only against a CUDA libtorch with NCCL's header (the nvidia-nccl wheel beside the CUDA torch):
/// then SPEEDLABS_NCCL is defined. MPI stays the control plane (the start, the losses, the weight
/// checksums, the faults); NCCL moves the gradients, GPU to GPU, as PyTorch's DDP does with c10d.
#pragma once
#include <torch/types.h>

#include <memory>

#include "common/workers/communicator.h"
#include "common/workers/mpi_communicator.h"

namespace speedlabs::workers {

/// NCCL's all-reduce on the worker's own GPU, on a stream of its own.
///
/// start_allreduce_sum() orders NCCL's stream after the work queued so far on the current stream (the
/// gradient copies into @p flat), queues ncclAllReduce(ncclSum) and returns: the host does not wait, so
/// backward goes on queueing kernels while NCCL moves the bucket. wait() makes the current stream wait for
/// that all-reduce (an event, not a host block), so the optimizer's kernels run after it.
class NcclCommunicator : public Communicator {
 public:
  /// Joins the NCCL clique of every worker of @p mpi: rank 0 makes the unique id, MPI broadcasts it.
  /// Uses the current CUDA device (the caller sets one device per worker first).
  /// @param mpi the job's MPI communicator (same ranks)
  explicit NcclCommunicator(MpiCommunicator& mpi);
  /// Makes GPU @p local_rank this process's current device and returns it; UsageError when this machine has
  /// no such GPU (NCCL needs one GPU per worker).
  /// @param local_rank the worker's number among the workers of its machine (Open MPI's local rank)
  static torch::Device use_local_gpu(int local_rank);
  /// Destroys the NCCL communicator and the stream.
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;             ///< owns a NCCL communicator
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;  ///< owns a NCCL communicator

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  /// @param flat a contiguous float32 tensor on this worker's GPU
  int start_allreduce_sum(const torch::Tensor& flat) override;
  void wait(int handle) override;
  /// ncclReduceScatter(ncclSum) on NCCL's stream, ordered after and before the current stream's work.
  void reduce_scatter_sum(const torch::Tensor& full, const torch::Tensor& shard) override;
  /// ncclAllGather in place (each worker sends its slice of @p full), ordered like reduce_scatter_sum().
  void all_gather_into(const torch::Tensor& full) override;

 private:
  /// Queues @p collective on NCCL's stream after the current stream's work so far, and makes the current
  /// stream wait for it: blocking for the GPU's order, not for the host.
  template <typename Collective>
  void run_in_order(const torch::Tensor& tensor, const Collective& collective);
  struct State;  // NCCL and CUDA handles, kept out of this header so that it needs neither
  std::unique_ptr<State> state_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace speedlabs::workers
