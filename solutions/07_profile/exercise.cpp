// Lab 07 reference solution: the prefetching loader.
#include "exercise.h"

#include <string>
#include <utility>

#include "common/errors.h"

namespace lab07 {

PrefetchLoader::PrefetchLoader(MakeBatch make_batch, int64_t capacity)
    : make_batch_(std::move(make_batch)), capacity_(capacity) {
  if (capacity_ < 1)
    throw speedlabs::UsageError("PrefetchLoader: capacity must be at least 1, not " + std::to_string(capacity_));
  if (!make_batch_) throw speedlabs::UsageError("PrefetchLoader: make_batch is empty");
  worker_ = std::thread([this] { work(); });
}

PrefetchLoader::~PrefetchLoader() { stop(); }

void PrefetchLoader::work() {
  for (int64_t index = 0;; ++index) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_requested_) return;  // asked to stop while the last batch was being made or queued
    }
    std::optional<datasets::Batch> batch;
    try {
      batch = make_batch_(index);  // outside the lock: this is the slow part that runs beside the loop
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
      finished_ = true;
      changed_.notify_all();
      return;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    if (!batch) {
      finished_ = true;
      changed_.notify_all();
      return;
    }
    changed_.wait(lock, [&] { return stop_requested_ || static_cast<int64_t>(queue_.size()) < capacity_; });
    if (stop_requested_) return;
    queue_.push_back(std::move(*batch));
    changed_.notify_all();
  }
}

std::optional<datasets::Batch> PrefetchLoader::next() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !queue_.empty() || finished_; });
  if (!queue_.empty()) {
    datasets::Batch batch = std::move(queue_.front());
    queue_.pop_front();
    changed_.notify_all();  // room for the worker
    return batch;
  }
  if (error_) std::rethrow_exception(error_);
  return std::nullopt;
}

void PrefetchLoader::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_requested_ = true;
    queue_.clear();
    changed_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  finished_ = true;
}

}  // namespace lab07
