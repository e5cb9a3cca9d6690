/// @file host_memory.h
/// @brief The host (CPU) allocator: bytes that CPU tensors hold, counted, and what glibc keeps when they are freed.
///
/// libtorch's CPU allocator keeps no statistics, unlike a GPU's caching allocator (common/memory.h).
/// install_host_memory_counter() puts a counting wrapper in front of it, so that live, peak and
/// allocation counts of CPU tensor storage can be read like the GPU's: exactly the bytes tensors asked
/// for, not the process's resident set (which also holds code, the heap's free lists and other libraries'
/// buffers). What it does not count: memory that libraries allocate without the c10 allocator (oneDNN or
/// MKL scratch space, std::vector inside operators, autograd's own bookkeeping).
#pragma once

#include <cstdint>
#include <string>

namespace speedlabs {

/// Counters of CPU tensor storage, in bytes requested by tensors.
struct HostMemoryStats {
  int64_t live_bytes = 0;   ///< bytes held by CPU tensors allocated since install that are alive now
  int64_t peak_bytes = 0;   ///< the most live_bytes since the last reset_host_memory_peak()
  int64_t allocations = 0;  ///< non-empty allocations since the last reset_host_memory_peak()
};

/// Installs (once; later calls do nothing) a counting wrapper around c10's current CPU allocator via
/// c10::SetAllocator, with a priority above the default one's, so every CPU tensor allocated from now on
/// is counted when it is allocated and when it is freed. Tensors allocated before the call are never
/// counted, not even when they are freed or grow (a storage keeps the allocator it was made with), so
/// install it before the tensors to be measured. The counters are thread-safe.
void install_host_memory_counter();

/// The counters now (all zero until install_host_memory_counter() is called).
/// @return live bytes now; peak bytes and allocations since the last reset_host_memory_peak()
HostMemoryStats host_memory_stats();

/// Starts a new phase: the peak becomes the live bytes now and the allocation count becomes 0.
void reset_host_memory_peak();

/// Makes this process, and the processes it starts, keep freed host memory for reuse instead of handing
/// it back to the kernel. By default glibc's malloc maps big buffers fresh from the kernel, unmaps them
/// when they are freed, and trims the top of its heap; a training loop that frees and reallocates its
/// large activations and gradients every step then page-faults them in again every step (lab 06's tiny
/// model on a CPU: ~8,000 faults per step, half of the step's time). Raising the mmap threshold is not
/// enough: glibc caps it at 32 MiB, and lab 07's 51 MB logits still cost 12,500 faults each per step. This
/// sets M_MMAP_MAX to 0 (every buffer from the heap) and M_TRIM_THRESHOLD to 1 GiB with mallopt, and exports
/// the same values as MALLOC_MMAP_MAX_ and MALLOC_TRIM_THRESHOLD_ for child processes, so that a C++ run and
/// the Python run it starts share one policy. Leaves everything as it is when MALLOC_MMAP_MAX_,
/// MALLOC_TRIM_THRESHOLD_ or MALLOC_MMAP_THRESHOLD_ is already set (the user's choice) and where the C
/// library is not glibc.
/// @return one line saying what was set or why nothing was
std::string keep_freed_host_memory();

}  // namespace speedlabs
