#include "common/workers/nccl_communicator.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "common/errors.h"

namespace speedlabs::workers {

namespace {

void check_nccl(ncclResult_t result, const char* call) {
  if (result != ncclSuccess) {
    throw speedlabs::RuntimeFailure(std::string(call) + " failed: " + ncclGetErrorString(result));
  }
}

void check_cuda(cudaError_t result, const char* call) {
  if (result != cudaSuccess)
    throw speedlabs::RuntimeFailure(std::string(call) + " failed: " + cudaGetErrorString(result));
}

}  // namespace

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;
  c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/true);
  std::vector<cudaEvent_t> done;  // one per handle: recorded on `stream` after its all-reduce
  std::vector<bool> in_use;
};

NcclCommunicator::NcclCommunicator(MpiCommunicator& mpi)
    : state_(std::make_unique<State>()), rank_(mpi.rank()), size_(mpi.size()) {
  ncclUniqueId id{};
  if (rank_ == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  mpi.broadcast_bytes(&id, sizeof(id), 0);
  check_nccl(ncclCommInitRank(&state_->comm, size_, id, rank_), "ncclCommInitRank");
}

torch::Device NcclCommunicator::use_local_gpu(int local_rank) {
  const int gpus = static_cast<int>(c10::cuda::device_count());
  if (local_rank >= gpus) {
    throw speedlabs::UsageError("worker " + std::to_string(local_rank) + " of this machine has no GPU of its own (" +
                                std::to_string(gpus) + " visible): NCCL needs one GPU per worker");
  }
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(local_rank));
  return {c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank)};
}

NcclCommunicator::~NcclCommunicator() {
  for (cudaEvent_t event : state_->done) cudaEventDestroy(event);
  if (state_->comm != nullptr) ncclCommDestroy(state_->comm);
}

int NcclCommunicator::start_allreduce_sum(const torch::Tensor& flat) {
  if (!flat.is_cuda() || flat.scalar_type() != torch::kFloat || !flat.is_contiguous()) {
    throw speedlabs::UsageError("an NCCL all-reduce needs a contiguous float32 CUDA tensor, got " + flat.toString());
  }
  count_ring_bytes(flat.numel() * 4, 2);
  int handle = 0;
  while (handle < static_cast<int>(state_->in_use.size()) && state_->in_use[handle]) ++handle;
  if (handle == static_cast<int>(state_->in_use.size())) {
    cudaEvent_t event = nullptr;
    check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    state_->done.push_back(event);
    state_->in_use.push_back(false);
  }
  // NCCL's stream must not read the bucket before the copies queued on the current stream have filled it.
  // The handle's event marks that point first; a wait binds to the record before it, so the same event
  // can then be recorded again for the all-reduce's end.
  const auto current = c10::cuda::getCurrentCUDAStream(flat.device().index());
  check_cuda(cudaEventRecord(state_->done[handle], current.stream()), "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(state_->stream.stream(), state_->done[handle], 0), "cudaStreamWaitEvent");
  check_nccl(ncclAllReduce(flat.data_ptr<float>(), flat.data_ptr<float>(), static_cast<size_t>(flat.numel()), ncclFloat,
                           ncclSum, state_->comm, state_->stream.stream()),
             "ncclAllReduce");
  // The caching allocator must not hand the bucket's memory to the current stream while NCCL still uses it.
  c10::cuda::CUDACachingAllocator::recordStream(flat.storage().data_ptr(), state_->stream);
  check_cuda(cudaEventRecord(state_->done[handle], state_->stream.stream()), "cudaEventRecord");
  state_->in_use[handle] = true;
  return handle;
}

void NcclCommunicator::wait(int handle) {
  if (handle < 0 || handle >= static_cast<int>(state_->in_use.size()) || !state_->in_use[handle]) {
    throw speedlabs::UsageError("wait(" + std::to_string(handle) + "): no all-reduce in flight has this handle");
  }
  // The current stream (the optimizer's) waits on the GPU; the host goes on at once.
  check_cuda(cudaStreamWaitEvent(c10::cuda::getCurrentCUDAStream().stream(), state_->done[handle], 0),
             "cudaStreamWaitEvent");
  state_->in_use[handle] = false;
}

template <typename Collective>
void NcclCommunicator::run_in_order(const torch::Tensor& tensor, const Collective& collective) {
  if (!tensor.is_cuda() || tensor.scalar_type() != torch::kFloat || !tensor.is_contiguous()) {
    throw speedlabs::UsageError("an NCCL collective needs a contiguous float32 CUDA tensor, got " + tensor.toString());
  }
  cudaEvent_t event = nullptr;
  check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  const auto current = c10::cuda::getCurrentCUDAStream(tensor.device().index());
  check_cuda(cudaEventRecord(event, current.stream()), "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(state_->stream.stream(), event, 0), "cudaStreamWaitEvent");
  collective(state_->stream.stream());
  c10::cuda::CUDACachingAllocator::recordStream(tensor.storage().data_ptr(), state_->stream);
  check_cuda(cudaEventRecord(event, state_->stream.stream()), "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(current.stream(), event, 0), "cudaStreamWaitEvent");
  check_cuda(cudaEventDestroy(event), "cudaEventDestroy");  // destroyed once its waits complete (CUDA's rule)
}

void NcclCommunicator::reduce_scatter_sum(const torch::Tensor& full, const torch::Tensor& shard) {
  if (full.numel() != shard.numel() * size_) {
    throw speedlabs::UsageError("reduce_scatter_sum: " + std::to_string(full.numel()) + " elements do not make " +
                                std::to_string(size_) + " shards of " + std::to_string(shard.numel()));
  }
  count_ring_bytes(full.numel() * 4, 1);
  run_in_order(full, [&](cudaStream_t stream) {
    check_nccl(ncclReduceScatter(full.data_ptr<float>(), shard.data_ptr<float>(), static_cast<size_t>(shard.numel()),
                                 ncclFloat, ncclSum, state_->comm, stream),
               "ncclReduceScatter");
  });
  c10::cuda::CUDACachingAllocator::recordStream(shard.storage().data_ptr(), state_->stream);
}

void NcclCommunicator::all_gather_into(const torch::Tensor& full) {
  if (full.numel() % size_ != 0) {
    throw speedlabs::UsageError("all_gather_into: " + std::to_string(full.numel()) + " elements do not split over " +
                                std::to_string(size_) + " workers");
  }
  count_ring_bytes(full.numel() * 4, 1);
  const auto slice = static_cast<size_t>(full.numel() / size_);
  run_in_order(full, [&](cudaStream_t stream) {
    float* data = full.data_ptr<float>();
    check_nccl(ncclAllGather(data + slice * rank_, data, slice, ncclFloat, state_->comm, stream), "ncclAllGather");
  });
}

}  // namespace speedlabs::workers
