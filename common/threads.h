/// @file threads.h
/// @brief Work split over this process's cores with plain threads.
///
/// Why not at::parallel_for: it is a header template whose loop runs in parallel only where the calling code is
/// compiled with OpenMP (libtorch's own kernels are; this project's code is not), so in a lab's code it silently
/// runs in one thread.
#pragma once
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace speedlabs {

/// How many workers to split @p items into: libtorch's intra-op thread count, at most one per item, at least 1.
inline int64_t worker_count(int64_t items) {
  return std::clamp<int64_t>(at::get_num_threads(), 1, std::max<int64_t>(items, 1));
}

/// Calls @p work(worker) for worker = 0 .. workers - 1, each in its own thread (worker 0 in the calling one), and
/// returns when all have; the first exception a worker threw is rethrown then.
template <typename Work>
void for_each_worker(int64_t workers, const Work& work) {
  std::exception_ptr failure;
  std::mutex failure_lock;
  const auto guarded = [&](int64_t worker) {
    try {
      work(worker);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(failure_lock);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (int64_t worker = 1; worker < workers; ++worker) threads.emplace_back(guarded, worker);
  guarded(0);
  for (auto& thread : threads) thread.join();
  if (failure) std::rethrow_exception(failure);
}

/// Splits [0, @p items) into worker_count(items) contiguous ranges and calls @p work(begin, end) on each, in
/// parallel.
template <typename Work>
void for_each_range(int64_t items, const Work& work) {
  const int64_t workers = worker_count(items);
  for_each_worker(workers, [&](int64_t worker) {
    const int64_t begin = items * worker / workers, end = items * (worker + 1) / workers;
    if (begin < end) work(begin, end);
  });
}

}  // namespace speedlabs
