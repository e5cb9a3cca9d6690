#include "common/workers/mpi_communicator.h"

#include <chrono>
#include <cstdlib>
#include <string>

#include "common/errors.h"

namespace speedlabs::workers {

namespace {

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw speedlabs::RuntimeFailure(std::string(call) + " failed: " + std::string(text, length));
}

void require_flat_float(const torch::Tensor& t) {
  if (!t.device().is_cpu() || t.scalar_type() != torch::kFloat || !t.is_contiguous()) {
    throw speedlabs::UsageError("an all-reduce needs a contiguous float32 CPU tensor, got " + t.toString());
  }
}

}  // namespace

MpiCommunicator::MpiCommunicator(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) throw speedlabs::RuntimeFailure("MPI is initialised already: one MpiCommunicator per process");
  check(MPI_Init(argc, argv), "MPI_Init");
  // Errors come back as codes (and become exceptions with MPI's text) instead of aborting silently.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiCommunicator::~MpiCommunicator() { MPI_Finalize(); }

int MpiCommunicator::start_allreduce_sum(const torch::Tensor& flat) {
  require_flat_float(flat);
  const auto start = std::chrono::steady_clock::now();
  count_ring_bytes(flat.numel() * 4, 2);
  int handle = 0;
  while (handle < static_cast<int>(in_use_.size()) && in_use_[handle]) ++handle;
  if (handle == static_cast<int>(in_use_.size())) {
    requests_.push_back(MPI_REQUEST_NULL);
    in_use_.push_back(false);
  }
  check(MPI_Iallreduce(MPI_IN_PLACE, flat.data_ptr<float>(), static_cast<int>(flat.numel()), MPI_FLOAT, MPI_SUM,
                       MPI_COMM_WORLD, &requests_[handle]),
        "MPI_Iallreduce");
  in_use_[handle] = true;
  // Progress for the all-reduces in flight: without a progress thread, Open MPI advances them only here.
  int all_done = 0;
  check(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &all_done, MPI_STATUSES_IGNORE),
        "MPI_Testall");
  mpi_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return handle;
}

void MpiCommunicator::wait(int handle) {
  if (handle < 0 || handle >= static_cast<int>(in_use_.size()) || !in_use_[handle]) {
    throw speedlabs::UsageError("wait(" + std::to_string(handle) + "): no all-reduce in flight has this handle");
  }
  const auto start = std::chrono::steady_clock::now();
  check(MPI_Wait(&requests_[handle], MPI_STATUS_IGNORE), "MPI_Wait");
  mpi_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  in_use_[handle] = false;
}

void MpiCommunicator::reduce_scatter_sum(const torch::Tensor& full, const torch::Tensor& shard) {
  require_flat_float(full);
  require_flat_float(shard);
  if (full.numel() != shard.numel() * size_) {
    throw speedlabs::UsageError("reduce_scatter_sum: " + std::to_string(full.numel()) + " elements do not make " +
                                std::to_string(size_) + " shards of " + std::to_string(shard.numel()));
  }
  const auto start = std::chrono::steady_clock::now();
  count_ring_bytes(full.numel() * 4, 1);
  check(MPI_Reduce_scatter_block(full.data_ptr<float>(), shard.data_ptr<float>(), static_cast<int>(shard.numel()),
                                 MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
        "MPI_Reduce_scatter_block");
  mpi_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void MpiCommunicator::all_gather_into(const torch::Tensor& full) {
  require_flat_float(full);
  if (full.numel() % size_ != 0) {
    throw speedlabs::UsageError("all_gather_into: " + std::to_string(full.numel()) + " elements do not split over " +
                                std::to_string(size_) + " workers");
  }
  const auto start = std::chrono::steady_clock::now();
  count_ring_bytes(full.numel() * 4, 1);
  const int slice = static_cast<int>(full.numel() / size_);
  check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, full.data_ptr<float>(), slice, MPI_FLOAT, MPI_COMM_WORLD),
        "MPI_Allgather");
  mpi_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double MpiCommunicator::sum(double value) {
  double total = 0;
  check(MPI_Allreduce(&value, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  return total;
}

std::pair<uint64_t, uint64_t> MpiCommunicator::min_max(uint64_t value) {
  uint64_t low = 0, high = 0;
  check(MPI_Allreduce(&value, &low, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  check(MPI_Allreduce(&value, &high, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  return {low, high};
}

std::vector<int64_t> MpiCommunicator::all_gather(const std::vector<int64_t>& values) {
  std::vector<int64_t> all(values.size() * static_cast<size_t>(size_));
  check(MPI_Allgather(values.data(), static_cast<int>(values.size()), MPI_INT64_T, all.data(),
                      static_cast<int>(values.size()), MPI_INT64_T, MPI_COMM_WORLD),
        "MPI_Allgather");
  return all;
}

void MpiCommunicator::broadcast_bytes(void* data, int bytes, int root) {
  check(MPI_Bcast(data, bytes, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
}

int MpiCommunicator::local_rank() const {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  return local != nullptr ? std::atoi(local) : rank_;
}

void MpiCommunicator::abort(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this is for the compiler
}

double MpiCommunicator::take_mpi_seconds() {
  const double seconds = mpi_seconds_;
  mpi_seconds_ = 0;
  return seconds;
}

}  // namespace speedlabs::workers
