/// @file memory.h
/// @brief Peak memory, measured: the device allocator's peak on a GPU, the process's resident peak on the CPU.
///
/// The two are different quantities. A GPU's caching allocator counts the bytes that tensors hold
/// (reset_peak_memory() / peak_memory_bytes()); libtorch's CPU allocator keeps no such statistics, so on
/// the CPU this measures the operating system's view of the whole process: its resident set
/// (current_rss_bytes(), peak_rss_bytes(), reset_peak_rss()), Linux only. The bytes CPU tensors hold,
/// counted like the GPU's, come from common/host_memory.h's counting allocator; TensorMemoryMeter reads
/// either of the two tensor counts, whichever the device has, the same way.
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <optional>

namespace speedlabs {

/// Starts a new peak for peak_memory_bytes(): the peak becomes what is allocated now.
/// A no-op on the CPU and on devices whose allocator keeps no statistics.
/// @param device the device whose allocator is reset
void reset_peak_memory(const c10::Device& device);

/// The most bytes tensors held at once on @p device since the last reset_peak_memory() (or since the
/// start), from the device's caching allocator.
/// @param device the device
/// @return nullopt on the CPU (its allocator keeps no statistics) and on devices without a caching
///         allocator in this build (a CUDA device needs a libtorch built with CUDA)
std::optional<int64_t> peak_memory_bytes(const c10::Device& device);

/// How much memory @p device has in all, in bytes: the machine's physical memory for the CPU, the GPU's
/// global memory for a CUDA device. What a run's size is checked against before it starts.
/// @return nullopt where it cannot be read (a GPU without CUDA in this libtorch, another accelerator)
std::optional<int64_t> total_memory_bytes(const c10::Device& device);

/// Bytes that tensors hold on one device, now and at their peak, read alike on the CPU and on a GPU: on the
/// CPU from the counting allocator of common/host_memory.h (installed by the constructor, so only tensors
/// allocated after it are counted), on a GPU from its caching allocator's statistics. Every reading first
/// waits for the device, so the allocations of the work queued on it are in the reading.
class TensorMemoryMeter {
 public:
  /// Throws UsageError where @p device's allocator keeps no statistics in this build (see can_measure()).
  explicit TensorMemoryMeter(const c10::Device& device);

  /// Whether a meter can measure @p device: the CPU, and a device whose caching allocator keeps
  /// statistics in this build (a CUDA GPU with a CUDA libtorch).
  static bool can_measure(const c10::Device& device);

  /// Bytes tensors hold now.
  int64_t live() const;
  /// The most bytes tensors held at once since the last reset_peak() (or since the start).
  int64_t peak() const;
  /// Starts a new peak: it becomes the bytes held now.
  void reset_peak();
  /// Bytes the caching allocator holds from the driver (freed blocks kept for reuse included);
  /// nullopt on the CPU, which has no such cache.
  std::optional<int64_t> reserved() const;
  /// The most bytes @p call held at once beyond those live before it: its temporaries and its result.
  int64_t extra_peak_bytes(const std::function<void()>& call);

  /// The device measured.
  const c10::Device& device() const { return device_; }

 private:
  c10::Device device_;
};

/// Resident memory of this process now, in bytes (VmRSS of /proc/self/status).
/// @return nullopt where /proc is not there (not Linux)
std::optional<int64_t> current_rss_bytes();

/// Peak resident memory of this process since the last reset_peak_rss(), in bytes (VmHWM).
/// @return nullopt where /proc is not there (not Linux)
std::optional<int64_t> peak_rss_bytes();

/// Resets the peak that peak_rss_bytes() reports to the current resident memory (Linux: writes 5 to
/// /proc/self/clear_refs).
/// @return false where that is not allowed; the peak then covers the process's whole life
bool reset_peak_rss();

}  // namespace speedlabs
