#include "common/memory.h"

#include <c10/core/CachingDeviceAllocator.h>

#include <unistd.h>

#include <fstream>
#include <string>

#include "common/device.h"
#include "common/errors.h"
#include "common/host_memory.h"

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

// What a caching allocator's statistics say of the bytes tensors hold: now, at the peak, and reserved.
struct AllocatorReading {
  int64_t live = 0, peak = 0, reserved = 0;
};

template <typename Stats>
AllocatorReading reading_of(const Stats& stats) {
  return {stats.allocated_bytes[kAggregate].current, stats.allocated_bytes[kAggregate].peak,
          stats.reserved_bytes[kAggregate].current};
}

// nullopt on the CPU and where the device's allocator keeps no statistics in this build.
std::optional<AllocatorReading> read_allocator(const c10::Device& device) {
  if (device.is_cuda()) {
#ifdef SPEEDLABS_TORCH_HAS_CUDA
    return reading_of(c10::cuda::CUDACachingAllocator::getDeviceStats(cuda_index(device)));
#else
    return std::nullopt;  // without CUDA in this libtorch there is no CUDA allocator to read
#endif
  }
  auto* allocator = accelerator_allocator(device);
  if (!allocator) return std::nullopt;
  return reading_of(allocator->getDeviceStats(index_or_zero(device)));
}

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
  const auto reading = read_allocator(device);
  if (!reading) return std::nullopt;
  return reading->peak;
}

TensorMemoryMeter::TensorMemoryMeter(const c10::Device& device) : device_(device) {
  if (!can_measure(device)) {
    throw UsageError("tensor memory is measured on the CPU and on a GPU whose allocator keeps statistics, not on " +
                     device.str() + " in this build");
  }
  if (device.is_cpu()) install_host_memory_counter();
}

bool TensorMemoryMeter::can_measure(const c10::Device& device) {
  return device.is_cpu() || read_allocator(device).has_value();
}

int64_t TensorMemoryMeter::live() const {
  synchronize(device_);
  return device_.is_cpu() ? host_memory_stats().live_bytes : read_allocator(device_)->live;
}

int64_t TensorMemoryMeter::peak() const {
  synchronize(device_);
  return device_.is_cpu() ? host_memory_stats().peak_bytes : read_allocator(device_)->peak;
}

void TensorMemoryMeter::reset_peak() {
  synchronize(device_);
  if (device_.is_cpu()) {
    reset_host_memory_peak();
  } else {
    reset_peak_memory(device_);
  }
}

std::optional<int64_t> TensorMemoryMeter::reserved() const {
  if (device_.is_cpu()) return std::nullopt;
  synchronize(device_);
  return read_allocator(device_)->reserved;
}

int64_t TensorMemoryMeter::extra_peak_bytes(const std::function<void()>& call) {
  const int64_t live_before = live();
  reset_peak();
  call();
  return peak() - live_before;
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
