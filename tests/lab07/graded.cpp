// Lab 07 graded tests: the prefetching loader (labs/07_profile/exercise.h), run by ./lab check 07.
// Suites: Lab07_PrefetchLoader_next (order, the bound, overlap, errors), Lab07_PrefetchLoader_stop (shutdown).
// The timing tests use sleeps, which need no free core, so they hold on a busy machine too.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/errors.h"
#include "exercise.h"

namespace {

using lab07::PrefetchLoader;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A deadlocked loader would hang the test until CTest's timeout; this ends it with a message instead.
constexpr auto kDeadline = std::chrono::seconds(20);

template <typename F>
void within_deadline(const std::string& what, F&& body) {
  auto done = std::async(std::launch::async, std::forward<F>(body));
  if (done.wait_for(kDeadline) != std::future_status::ready) {
    std::cerr << "[  FAILED  ] " << what << ": still not done after " << kDeadline.count()
              << " s: a wait that is never woken (a missing notify_all, or a join while holding the lock)?\n";
    std::_Exit(1);
  }
  done.get();  // rethrows what the body threw, so gtest reports it
}

// Batch i: x filled with i, y with i + 1 (shape 1 x 2).
datasets::Batch numbered(int64_t i) {
  return {torch::full({1, 2}, i, torch::kLong), torch::full({1, 2}, i + 1, torch::kLong)};
}

// A stream of @p count numbered batches that counts the calls to it.
lab07::MakeBatch counted_stream(std::atomic<int>& calls, int64_t count, milliseconds cost = milliseconds(0)) {
  return [&calls, count, cost](int64_t i) -> std::optional<datasets::Batch> {
    calls += 1;
    if (cost.count() > 0) std::this_thread::sleep_for(cost);
    if (i >= count) return std::nullopt;
    return numbered(i);
  };
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

TEST(Lab07_PrefetchLoader_next, GivesEveryBatchInOrderThenNullopt) {
  within_deadline("next() in order", [] {
    std::atomic<int> calls{0};
    PrefetchLoader loader(counted_stream(calls, 5), 2);
    for (int64_t i = 0; i < 5; ++i) {
      const auto batch = loader.next();
      ASSERT_TRUE(batch.has_value()) << "next() returned nullopt at batch " << i << " of 5";
      EXPECT_EQ(batch->x[0][0].item<int64_t>(), i) << "batch " << i << " came out of order (x holds its number)";
      EXPECT_EQ(batch->y[0][0].item<int64_t>(), i + 1) << "batch " << i << ": y is not the y made with it";
    }
    EXPECT_FALSE(loader.next().has_value()) << "after the last batch next() must return nullopt";
    EXPECT_FALSE(loader.next().has_value()) << "and nullopt again on every later call";
  });
}

TEST(Lab07_PrefetchLoader_next, RejectsABadCapacityOrAnEmptyMaker) {
  std::atomic<int> calls{0};
  EXPECT_THROW(PrefetchLoader(counted_stream(calls, 3), 0), speedlabs::UsageError) << "capacity 0 must be rejected";
  EXPECT_THROW(PrefetchLoader(lab07::MakeBatch{}, 2), speedlabs::UsageError) << "an empty make_batch must be rejected";
  EXPECT_EQ(calls.load(), 0) << "a rejected loader must not have started making batches";
}

TEST(Lab07_PrefetchLoader_next, MakesBatchesOnAnotherThread) {
  within_deadline("batches on a worker thread", [] {
    std::thread::id maker;
    PrefetchLoader loader(
        [&maker](int64_t i) -> std::optional<datasets::Batch> {
          if (i > 0) return std::nullopt;
          maker = std::this_thread::get_id();
          return numbered(i);
        },
        1);
    ASSERT_TRUE(loader.next().has_value());
    EXPECT_NE(maker, std::this_thread::get_id()) << "make_batch ran on the caller's thread: nothing is prefetched";
  });
}

TEST(Lab07_PrefetchLoader_next, KeepsAtMostCapacityBatchesReady) {
  within_deadline("the bound", [] {
    std::atomic<int> calls{0};
    PrefetchLoader loader(counted_stream(calls, 1000), 3);
    std::this_thread::sleep_for(milliseconds(300));  // a fast worker, a loop that takes nothing
    // Three queued, and one more may be made and waiting for room.
    EXPECT_GE(calls.load(), 3) << "the worker should fill the queue while the loop is busy elsewhere";
    EXPECT_LE(calls.load(), 4) << "capacity 3, but make_batch was called " << calls.load()
                               << " times before the loop took any batch: the queue is not bounded";
    ASSERT_TRUE(loader.next().has_value());
    std::this_thread::sleep_for(milliseconds(200));
    EXPECT_LE(calls.load(), 5) << "after one batch was taken, at most one more may be made";
  });
}

TEST(Lab07_PrefetchLoader_next, WorksAheadWhileTheLoopComputes) {
  within_deadline("overlap", [] {
    constexpr int kBatches = 6;
    constexpr auto kCost = milliseconds(40);
    std::atomic<int> calls{0};
    const auto start = Clock::now();
    PrefetchLoader loader(counted_stream(calls, kBatches, kCost), 2);
    for (int i = 0; i < kBatches; ++i) {
      ASSERT_TRUE(loader.next().has_value());
      std::this_thread::sleep_for(kCost);  // the "training step"
    }
    const double ms = ms_since(start);
    // One after the other: 6 x (40 + 40) = 480 ms. Overlapped: about 40 + 6 x 40 = 280 ms.
    const double serial_ms = kBatches * 2.0 * static_cast<double>(kCost.count());
    EXPECT_LT(ms, 0.85 * serial_ms) << "6 batches that each take 40 ms to make and 40 ms to use took " << ms
                                    << " ms; made one after the other they take " << serial_ms
                                    << " ms, overlapped about 280 ms: the worker does not work ahead";
  });
}

TEST(Lab07_PrefetchLoader_next, RethrowsTheWorkersExceptionAfterItsBatches) {
  within_deadline("an exception in the worker", [] {
    PrefetchLoader loader(
        [](int64_t i) -> std::optional<datasets::Batch> {
          if (i == 2) throw std::runtime_error("the disk is on fire");
          return numbered(i);
        },
        4);
    for (int64_t i = 0; i < 2; ++i) {
      const auto batch = loader.next();
      ASSERT_TRUE(batch.has_value()) << "batch " << i << " was made before the failure and must still come out";
      EXPECT_EQ(batch->x[0][0].item<int64_t>(), i);
    }
    for (int attempt = 0; attempt < 2; ++attempt) {
      try {
        loader.next();
        ADD_FAILURE() << "next() after the worker's exception returned instead of rethrowing it (call " << attempt + 1
                      << ")";
      } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()), "the disk is on fire") << "next() must rethrow the worker's own exception";
      }
    }
  });
}

TEST(Lab07_PrefetchLoader_stop, StopsEarlyWhileTheWorkerWaitsForRoom) {
  within_deadline("stop with a full queue", [] {
    std::atomic<int> calls{0};
    double stop_ms = 0;
    {
      PrefetchLoader loader(counted_stream(calls, 1'000'000), 1);
      ASSERT_TRUE(loader.next().has_value());
      std::this_thread::sleep_for(milliseconds(100));  // the queue is full again: the worker waits for room
      const auto start = Clock::now();
      loader.stop();
      stop_ms = ms_since(start);
    }
    EXPECT_LT(stop_ms, 1000) << "stop() took " << stop_ms << " ms: the worker waiting for room was not woken";
    const int after_stop = calls.load();
    std::this_thread::sleep_for(milliseconds(100));
    EXPECT_EQ(calls.load(), after_stop) << "make_batch was called after stop() returned";
    EXPECT_LE(after_stop, 4) << "capacity 1 and one batch taken, but make_batch ran " << after_stop << " times";
  });
}

TEST(Lab07_PrefetchLoader_stop, TheDestructorStopsALoaderNobodyStopped) {
  within_deadline("the destructor", [] {
    std::atomic<int> calls{0};
    const auto start = Clock::now();
    { PrefetchLoader loader(counted_stream(calls, 1'000'000), 2); }
    EXPECT_LT(ms_since(start), 1000) << "destroying a loader with a full queue should end its worker promptly";
  });
}

TEST(Lab07_PrefetchLoader_stop, StopTwiceThenNextReturnsNullopt) {
  within_deadline("stop twice", [] {
    std::atomic<int> calls{0};
    PrefetchLoader loader(counted_stream(calls, 1'000'000), 2);
    loader.stop();
    loader.stop();  // a second stop must find nothing to do
    EXPECT_FALSE(loader.next().has_value()) << "after stop() next() must return nullopt, not wait";
  });
}

TEST(Lab07_PrefetchLoader_stop, WaitsForABatchBeingMadeAndMakesNoMore) {
  within_deadline("stop during make_batch", [] {
    std::atomic<int> calls{0};
    {
      PrefetchLoader loader(counted_stream(calls, 1'000'000, milliseconds(150)), 3);
      std::this_thread::sleep_for(milliseconds(50));  // batch 0 is being made
      loader.stop();
      EXPECT_LE(calls.load(), 2) << "stop() during the first make_batch: the worker went on making batches";
    }
    const int after = calls.load();
    std::this_thread::sleep_for(milliseconds(200));
    EXPECT_EQ(calls.load(), after) << "make_batch was called after stop() returned";
  });
}

}  // namespace
