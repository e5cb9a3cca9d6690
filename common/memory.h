/// @file memory.h
/// @brief Peak memory, measured: the device allocator's peak on a GPU, the process's resident peak on the CPU.
///
/// The two are different quantities. A GPU's caching allocator counts the bytes that tensors hold
/// (reset_peak_memory() / peak_memory_bytes()); the CPU allocator keeps no such statistics, so on the
/// CPU the closest measure is the operating system's view of the whole process: its resident set
/// (current_rss_bytes(), peak_rss_bytes(), reset_peak_rss()), Linux only.
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>

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

/// Makes this process, and the processes it starts, keep freed host memory for reuse instead of handing
/// it back to the kernel. By default glibc's malloc maps big buffers fresh from the kernel, unmaps them
/// when they are freed, and trims the top of its heap; a training loop that frees and reallocates its
/// large activations and gradients every step then page-faults them in again every step (lab 06's tiny
/// model on a CPU: ~8,000 faults per step, half of the step's time). This sets M_MMAP_THRESHOLD to
/// 32 MiB (the most glibc accepts) and M_TRIM_THRESHOLD to 1 GiB with mallopt, and exports the same
/// values as MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ for child processes, so that a C++ run and
/// the Python run it starts share one policy. Leaves everything as it is when either variable is
/// already set (the user's choice) and where the C library is not glibc.
/// @return one line saying what was set or why nothing was
std::string keep_freed_host_memory();

}  // namespace speedlabs
