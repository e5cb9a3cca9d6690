#include "common/host_memory.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace speedlabs {

namespace {

// Above the priority 0 that c10 registers its default CPU allocator with, so that the counter stays in
// place if a static initializer registers that default again later.
constexpr uint8_t kCounterPriority = 1;

// A wrapper in front of c10's CPU allocator. Each DataPtr it hands out keeps the shape of the inner
// allocator's (context == data, one plain deleter), so the raw_allocate/raw_deallocate interface and
// copy-on-write clones keep working; the size and the inner context and deleter of each live
// allocation are kept in a table, so a free is subtracted with exactly the bytes its allocation added.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t bytes) override {
    c10::DataPtr inner = inner_->allocate(bytes);
    void* data = inner.get();
    if (data == nullptr) return inner;  // an empty tensor: no storage, nothing to count or to free
    const c10::Device device = inner.device();
    const c10::DeleterFnPtr inner_deleter = inner.get_deleter();
    void* inner_context = inner.release_context();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_.emplace(data, Allocation{static_cast<int64_t>(bytes), inner_context, inner_deleter});
      stats_.live_bytes += static_cast<int64_t>(bytes);
      stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.live_bytes);
      ++stats_.allocations;
    }
    return {data, data, &free_counted, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &free_counted; }

  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }

  HostMemoryStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_bytes = stats_.live_bytes;
    stats_.allocations = 0;
  }

 private:
  struct Allocation {
    int64_t bytes;
    void* inner_context;
    c10::DeleterFnPtr inner_deleter;
  };

  static void free_counted(void* data);

  c10::Allocator* inner_;
  std::mutex mutex_;
  std::unordered_map<void*, Allocation> live_;
  HostMemoryStats stats_;
};

// Never destroyed: tensors freed while the process exits (static tensors in libtorch) still find it.
CountingAllocator* counter = nullptr;

void CountingAllocator::free_counted(void* data) {
  Allocation allocation{};
  {
    std::lock_guard<std::mutex> lock(counter->mutex_);
    const auto found = counter->live_.find(data);
    if (found == counter->live_.end()) return;  // not ours: cannot happen, since only we hand this deleter out
    allocation = found->second;
    counter->live_.erase(found);
    counter->stats_.live_bytes -= allocation.bytes;
  }
  allocation.inner_deleter(allocation.inner_context);
}

}  // namespace

void install_host_memory_counter() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    counter = new CountingAllocator(c10::GetAllocator(c10::kCPU));
    c10::SetAllocator(c10::kCPU, counter, kCounterPriority);
  });
}

HostMemoryStats host_memory_stats() { return counter ? counter->stats() : HostMemoryStats{}; }

void reset_host_memory_peak() {
  if (counter) counter->reset_peak();
}

std::string keep_freed_host_memory() {
  constexpr const char* kMapVariable = "MALLOC_MMAP_MAX_";
  constexpr const char* kTrimVariable = "MALLOC_TRIM_THRESHOLD_";
  if (std::getenv(kMapVariable) || std::getenv(kTrimVariable) || std::getenv("MALLOC_MMAP_THRESHOLD_")) {
    return std::string("host allocator: as the environment sets it (") + kMapVariable + ", " + kTrimVariable +
           " or MALLOC_MMAP_THRESHOLD_)";
  }
#if defined(__GLIBC__)
  // No buffer mapped apart: glibc caps its mmap threshold at 32 MiB, so without this a bigger one (lab 07's
  // logits, 51 MB) is still mapped fresh and faulted in on every step.
  constexpr int kMappedBuffers = 0;
  constexpr int kTrimThreshold = 1 << 30;  // the heap's free top is handed back only beyond 1 GiB
  if (mallopt(M_MMAP_MAX, kMappedBuffers) != 1 || mallopt(M_TRIM_THRESHOLD, kTrimThreshold) != 1) {
    return "host allocator: glibc defaults (mallopt refused the settings)";
  }
  setenv(kMapVariable, std::to_string(kMappedBuffers).c_str(), 1);
  setenv(kTrimVariable, std::to_string(kTrimThreshold).c_str(), 1);
  return "host allocator: glibc keeps freed memory (every buffer from its heap, none mapped apart; trim threshold "
         "1 GiB), also for child processes";
#else
  return "host allocator: the C library's defaults (not glibc)";
#endif
}

}  // namespace speedlabs
