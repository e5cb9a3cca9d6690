/// @file common/workers/mpi_communicator.h
/// @brief The workers' engine: the Communicator on MPI (Open MPI from the system's packages).
#pragma once
#include <mpi.h>
#include <torch/types.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "common/workers/communicator.h"

namespace speedlabs::workers {

/// The MPI implementation: one process per worker, started by mpirun (MPI_COMM_WORLD).
///
/// start_allreduce_sum() is MPI_Iallreduce(MPI_IN_PLACE, MPI_FLOAT, MPI_SUM). Open MPI moves a
/// non-blocking collective forward only inside MPI calls, so every start also tests the all-reduces
/// already in flight (MPI_Testall): each gradient hook that starts a bucket pushes the earlier ones on.
class MpiCommunicator : public Communicator {
 public:
  /// MPI_Init; throws RuntimeFailure when MPI was initialised already. One per process.
  MpiCommunicator(int* argc, char*** argv);
  /// MPI_Finalize.
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;             ///< one per process
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;  ///< one per process

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int start_allreduce_sum(const torch::Tensor& flat) override;
  void wait(int handle) override;
  /// MPI_Reduce_scatter_block(MPI_FLOAT, MPI_SUM).
  void reduce_scatter_sum(const torch::Tensor& full, const torch::Tensor& shard) override;
  /// MPI_Allgather(MPI_IN_PLACE).
  void all_gather_into(const torch::Tensor& full) override;

  /// The sum of @p value over all workers (a blocking MPI_Allreduce of one double).
  /// @param value this worker's value
  double sum(double value);
  /// The smallest and the largest of @p value over all workers.
  /// @param value this worker's value
  std::pair<uint64_t, uint64_t> min_max(uint64_t value);
  /// Every worker's @p values, rank after rank (MPI_Allgather); every worker must pass as many.
  /// @param values this worker's values
  std::vector<int64_t> all_gather(const std::vector<int64_t>& values);

  /// Copies @p bytes bytes at @p data from worker @p root to every other worker (MPI_Bcast).
  /// @param data  the buffer: read on @p root, written on the others
  /// @param bytes its size
  /// @param root  the worker whose bytes everyone gets
  void broadcast_bytes(void* data, int bytes, int root);
  /// This worker's number among the workers on its machine (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK; the
  /// global rank when that is not set): which GPU it takes.
  int local_rank() const;

  /// Ends every worker of the job (MPI_Abort): mpirun stops the others and exits with @p exit_code.
  /// @param exit_code the code mpirun exits with
  [[noreturn]] void abort(int exit_code);

  /// Seconds this worker spent inside start_allreduce_sum(), wait(), reduce_scatter_sum() and
  /// all_gather_into() since the last call, then resets
  /// the count: the communication time that was not hidden behind other work.
  double take_mpi_seconds();

 private:
  int rank_ = 0;
  int size_ = 1;
  std::vector<MPI_Request> requests_;  // one per handle; MPI_REQUEST_NULL once complete
  std::vector<bool> in_use_;           // a handle is free for reuse once waited for
  double mpi_seconds_ = 0;
};

}  // namespace speedlabs::workers
