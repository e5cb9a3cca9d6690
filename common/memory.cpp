#include "common/memory.h"

#include <c10/core/CachingDeviceAllocator.h>

#include <unistd.h>

#include <fstream>
#include <string>

#ifdef SPEEDLABS_TORCH_HAS_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace speedlabs {

namespace {

constexpr auto kAggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

// The caching allocator of a non-CUDA accelerator (MPS, XPU), reached through libtorch's generic
// interface; nullptr on the CPU and where the registered allocator keeps no statistics.
c10::DeviceAllocator* accelerator_allocator(const c10::Device& device) {
  if (device.is_cpu()) return nullptr;
  return dynamic_cast<c10::DeviceAllocator*>(c10::GetAllocator(device.type()));
}

c10::DeviceIndex index_or_zero(const c10::Device& device) { return device.has_index() ? device.index() : 0; }

#ifdef SPEEDLABS_TORCH_HAS_CUDA
c10::DeviceIndex cuda_index(const c10::Device& device) {
  return device.has_index() ? device.index() : c10::cuda::current_device();
}
#endif

// A "Key:   12345 kB" line of /proc/self/status, in bytes.
std::optional<int64_t> status_bytes(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1)) * 1024;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> total_memory_bytes(const c10::Device& device) {
  if (device.is_cpu()) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page_size <= 0) return std::nullopt;
    return static_cast<int64_t>(pages) * page_size;
  }
#ifdef SPEEDLABS_TORCH_HAS_CUDA
  if (device.is_cuda()) {
    size_t free_bytes = 0, total_bytes = 0;
    const c10::cuda::CUDAGuard guard(cuda_index(device));
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return std::nullopt;
    return static_cast<int64_t>(total_bytes);
  }
#endif
  return std::nullopt;
}

void reset_peak_memory(const c10::Device& device) {
  if (device.is_cuda()) {
#ifdef SPEEDLABS_TORCH_HAS_CUDA
    c10::cuda::CUDACachingAllocator::resetPeakStats(cuda_index(device));
#endif
    return;  // without CUDA in this libtorch there is no CUDA allocator to reset
  }
  if (auto* allocator = accelerator_allocator(device)) allocator->resetPeakStats(index_or_zero(device));
}

std::optional<int64_t> peak_memory_bytes(const c10::Device& device) {
  if (device.is_cuda()) {
#ifdef SPEEDLABS_TORCH_HAS_CUDA
    return c10::cuda::CUDACachingAllocator::getDeviceStats(cuda_index(device)).allocated_bytes[kAggregate].peak;
#else
    return std::nullopt;
#endif
  }
  auto* allocator = accelerator_allocator(device);
  if (!allocator) return std::nullopt;
  return allocator->getDeviceStats(index_or_zero(device)).allocated_bytes[kAggregate].peak;
}

std::optional<int64_t> current_rss_bytes() { return status_bytes("VmRSS"); }

std::optional<int64_t> peak_rss_bytes() { return status_bytes("VmHWM"); }

bool reset_peak_rss() {
  std::ofstream clear_refs("/proc/self/clear_refs");
  clear_refs << "5";
  clear_refs.flush();
  return clear_refs.good();
}

}  // namespace speedlabs
