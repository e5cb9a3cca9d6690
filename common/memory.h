/// @file memory.h
/// @brief Peak memory, measured: the device allocator's peak on a GPU, the process's resident peak on the CPU.
///
/// The two are different quantities. A GPU's caching allocator counts the bytes that tensors hold
/// (reset_peak_memory() / peak_memory_bytes()); libtorch's CPU allocator keeps no such statistics, so on
/// the CPU this measures the operating system's view of the whole process: its resident set
/// (current_rss_bytes(), peak_rss_bytes(), reset_peak_rss()), Linux only. The bytes CPU tensors hold,
/// counted like the GPU's, come from common/host_memory.h's counting allocator.
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
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
