/// @file labs/07_profile/exercise.h
/// @brief Lab 07 exercise: a loader that prepares the next batches on a background thread while the
/// training loop computes, so the device never waits for data it could have had already.
///
/// Stubs live in labs/07_profile/exercise.cpp, the reference in solutions/07_profile/exercise.cpp.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "datasets/data_loader.h"

namespace lab07 {

/// Makes batch number @p index of a stream (0, 1, 2, ... in that order), or returns nullopt when the
/// stream has ended. It may throw; the exception must reach whoever asks for that batch.
using MakeBatch = std::function<std::optional<datasets::Batch>(int64_t index)>;

/// A prefetching batch loader: one worker thread calls make_batch(0), make_batch(1), ... and puts the
/// batches into a queue of at most `capacity` batches; the training loop takes them out with next().
///
/// While the loop computes step i, the worker is already preparing batches i+1, i+2, ...; the loop
/// only waits when the worker falls behind. The queue is bounded so that a worker faster than the loop
/// stops at `capacity` batches instead of filling the memory (it waits until the loop takes one).
/// This is what PyTorch's DataLoader does with num_workers > 0 and prefetch_factor, in one thread.
///
/// Contract:
/// - batches come out of next() in the order make_batch made them, each exactly once;
/// - at most `capacity` batches wait in the queue (the worker may hold one more it has just made);
/// - after the last batch next() returns nullopt, again on every later call;
/// - when make_batch throws, next() first returns the batches made before, then rethrows that same
///   exception (std::rethrow_exception) on that call and on every later one;
/// - stop() (and the destructor) ends the worker promptly even when it is waiting for room in a full
///   queue, and never calls make_batch again once it returns; the loop may stop early, at any batch.
/// All members are for one consumer thread (the training loop) plus the loader's own worker.
class PrefetchLoader {
 public:
  /// Starts the worker thread, which begins making batches at once.
  /// Throws speedlabs::UsageError when @p capacity < 1 or @p make_batch is empty (no thread started).
  /// @param make_batch makes batch i (called from the worker thread only, for i = 0, 1, 2, ...)
  /// @param capacity   the most batches that wait in the queue
  PrefetchLoader(MakeBatch make_batch, int64_t capacity);

  /// Stops the worker (stop()) and waits for it.
  ~PrefetchLoader();

  PrefetchLoader(const PrefetchLoader&) = delete;             ///< one worker, one owner
  PrefetchLoader& operator=(const PrefetchLoader&) = delete;  ///< one worker, one owner

  /// The next batch: waits until the worker has made it. nullopt when the stream has ended (or after
  /// stop()); rethrows the worker's exception once the batches made before it have been taken.
  std::optional<datasets::Batch> next();

  /// Asks the worker to stop, wakes it if it waits for room, and joins it. Batches still queued are
  /// dropped. Safe to call more than once; the destructor calls it.
  void stop();

  /// The most batches that wait in the queue.
  int64_t capacity() const { return capacity_; }

 private:
  /// The worker thread's loop: make batch after batch, wait while the queue is full, stop when asked,
  /// when the stream ends, or when make_batch throws (keeping the exception for next()).
  void work();

  MakeBatch make_batch_;
  int64_t capacity_;
  std::mutex mutex_;                 // guards everything below
  std::condition_variable changed_;  // notified on every change of the queue or the flags
  std::deque<datasets::Batch> queue_;
  bool finished_ = false;        // the worker made its last batch, failed, or was stopped
  bool stop_requested_ = false;  // stop() was called
  std::exception_ptr error_;     // what make_batch threw, for next() to rethrow
  std::thread worker_;           // started last, after every member it uses
};

}  // namespace lab07
