/// @file tests/lab04/queued_device.h
/// @brief A device stand-in that behaves like a GPU on any machine: work handed to it runs on a worker
/// thread, the call that hands it over returns at once, and only synchronize() waits for it.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "exercise.h"

namespace lab04::testing {

/// Runs submitted work (here: a sleep of a given length, standing in for a kernel) on one worker
/// thread, in order, like a GPU stream.
class QueuedDevice final : public AsyncDevice {
 public:
  QueuedDevice() : worker_([this] { work(); }) {}

  ~QueuedDevice() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    worker_.join();
  }

  QueuedDevice(const QueuedDevice&) = delete;
  QueuedDevice& operator=(const QueuedDevice&) = delete;

  /// Queues work that takes @p duration and returns at once, like a kernel launch.
  void submit(std::chrono::milliseconds duration) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(duration);
      ++unfinished_;
    }
    changed_.notify_all();
  }

  /// Blocks until every submitted piece of work has finished.
  void synchronize() override {
    std::unique_lock<std::mutex> lock(mutex_);
    ++synchronize_calls_;
    changed_.wait(lock, [this] { return unfinished_ == 0; });
  }

  /// How many times synchronize() was called.
  int synchronize_calls() {
    std::lock_guard<std::mutex> lock(mutex_);
    return synchronize_calls_;
  }

  /// Work submitted and not finished yet.
  int unfinished() {
    std::lock_guard<std::mutex> lock(mutex_);
    return unfinished_;
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      const auto duration = queue_.front();
      queue_.pop_front();
      lock.unlock();
      std::this_thread::sleep_for(duration);
      lock.lock();
      --unfinished_;
      changed_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::chrono::milliseconds> queue_;
  int unfinished_ = 0;
  int synchronize_calls_ = 0;
  bool stopping_ = false;
  std::thread worker_;  // last: starts after the members it uses
};

}  // namespace lab04::testing
