#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "common/errors.h"
#include "common/process.h"
#include "common/timer.h"

TEST(Timer, SummarizeOddAndEven) {
  auto odd = speedlabs::summarize({5.0, 1.0, 3.0});
  EXPECT_DOUBLE_EQ(odd.median_ms, 3.0);
  EXPECT_DOUBLE_EQ(odd.min_ms, 1.0);
  EXPECT_DOUBLE_EQ(odd.max_ms, 5.0);
  auto even = speedlabs::summarize({4.0, 1.0, 3.0, 2.0});
  EXPECT_DOUBLE_EQ(even.median_ms, 2.5);
  EXPECT_EQ(even.samples_ms.size(), 4u);
  EXPECT_THROW(speedlabs::summarize({}), std::invalid_argument);
}

TEST(Timer, CountsWarmupAndRepeatsSeparately) {
  int calls = 0;
  const auto stats = speedlabs::time_ms([&] { ++calls; }, c10::Device(c10::kCPU), {2, 5});
  EXPECT_EQ(calls, 7);
  EXPECT_EQ(stats.samples_ms.size(), 5u);
}

TEST(Timer, FirstCallIsKeptApart) {
  int calls = 0;
  // The first call sleeps 20 ms, the rest do nothing: the median must not see the cold call.
  const auto stats = speedlabs::time_ms(
      [&] {
        if (calls++ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      },
      c10::Device(c10::kCPU), {1, 5});
  EXPECT_GE(stats.first_ms, 20.0);
  EXPECT_LT(stats.median_ms, stats.first_ms);
}

TEST(Timer, MeasuresSleepsFromBelow) {
  // A sleep never returns early, so each sample is at least its length; no upper bound is asserted.
  const auto stats = speedlabs::time_ms([] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); },
                                        c10::Device(c10::kCPU), {0, 3});
  EXPECT_GE(stats.min_ms, 5.0);
  EXPECT_LE(stats.min_ms, stats.median_ms);
  EXPECT_LE(stats.median_ms, stats.max_ms);
}

TEST(Timer, RejectsBadCounts) {
  const c10::Device cpu(c10::kCPU);
  EXPECT_THROW(speedlabs::time_ms([] {}, cpu, {0, 0}), speedlabs::UsageError);
  EXPECT_THROW(speedlabs::time_ms([] {}, cpu, {-1, 3}), speedlabs::UsageError);
}

TEST(Timer, QuartilesInterpolateBetweenSamples) {
  const auto s = speedlabs::summarize_samples({4.0, 1.0, 3.0, 2.0, 5.0});
  EXPECT_DOUBLE_EQ(s.median, 3.0);
  EXPECT_DOUBLE_EQ(s.q1, 2.0);
  EXPECT_DOUBLE_EQ(s.q3, 4.0);
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.spread(), 2.0 / 3.0);  // the middle half spans 2 around a median of 3
  // One wild sample moves neither the median nor the quartiles much: that is why they decide.
  const auto wild = speedlabs::summarize_samples({2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 1000.0});
  EXPECT_DOUBLE_EQ(wild.median, 2.0);
  EXPECT_DOUBLE_EQ(wild.q3, 2.0);
  EXPECT_DOUBLE_EQ(wild.spread(), 0.0);
  EXPECT_TRUE(std::isinf(speedlabs::summarize_samples({0.0, 0.0}).spread()));
}

TEST(Timer, InterleavesTheSidesAndReversesEveryOtherRound) {
  std::string order;
  const auto result =
      speedlabs::time_interleaved({[&] { order += 'A'; }, [&] { order += 'B'; }}, c10::Device(c10::kCPU), {1, 4});
  // One warm-up round, then four measured ones: A B, B A, A B, B A, A B.
  EXPECT_EQ(order, "ABBAABBAAB");
  ASSERT_EQ(result.sides.size(), 2u);
  EXPECT_EQ(result.sides[0].samples_ms.size(), 4u);
  EXPECT_EQ(result.sides[1].samples_ms.size(), 4u);
}

TEST(Timer, RatioIsTakenWithinEachRound) {
  // Side A takes twice as long as B, and every round is slower than the last (a machine getting busier):
  // the per-round ratio stays 2 with no spread, though each side's own times scatter widely.
  // Nine measured rounds after one warm-up round: one sleep overshot by a busy machine cannot move the
  // quartiles far (with five rounds and no warm-up, one late first call once brought A's spread to 0.32).
  int calls = 0;
  const auto ms = [](int n) { return std::chrono::milliseconds(n); };
  const auto result = speedlabs::time_interleaved({[&] { std::this_thread::sleep_for(ms(4 * (1 + calls++ / 2))); },
                                                   [&] { std::this_thread::sleep_for(ms(2 * (1 + calls++ / 2))); }},
                                                  c10::Device(c10::kCPU), {1, 9});
  const auto ratio = result.ratio(0, 1);
  EXPECT_GT(result.sides[0].spread(), 0.4);  // A sleeps 8, 12, ..., 40 ms: its middle half spans 16 around 24
  EXPECT_NEAR(ratio.median, 2.0, 0.3);       // a typical sleep overshoots by well under a millisecond
  EXPECT_LT(ratio.spread(), 0.2);
}

TEST(Timer, AddsRoundsWhileScatteredUpToTheLimit) {
  int calls = 0;
  // Every call is 1 ms longer than the last, so the spread never settles: rounds go on to max_repeats.
  const auto scattered = speedlabs::time_ms([&] { std::this_thread::sleep_for(std::chrono::milliseconds(++calls)); },
                                            c10::Device(c10::kCPU), {0, 3, 8, 0.01, 10.0});
  EXPECT_EQ(scattered.samples_ms.size(), 8u);
  // A steady call stops at the minimum. 20 ms sleeps: of three, one must overshoot by 20 ms to reach a spread
  // of 0.5 (2 ms sleeps reached it once beside the whole test suite, an overshoot of 2 ms).
  const auto steady = speedlabs::time_ms([] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); },
                                         c10::Device(c10::kCPU), {0, 3, 8, 0.5, 10.0});
  EXPECT_EQ(steady.samples_ms.size(), 3u);
  // The budget ends it too: 3 calls of 30 ms spend a 50 ms budget.
  const auto budgeted = speedlabs::time_ms([] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); },
                                           c10::Device(c10::kCPU), {0, 3, 100, 0.0, 0.05});
  EXPECT_EQ(budgeted.samples_ms.size(), 3u);
}

TEST(Timer, InterleavingRejectsNoSides) {
  EXPECT_THROW(speedlabs::time_interleaved({}, c10::Device(c10::kCPU)), speedlabs::UsageError);
}

TEST(Timer, AStopRequestIsAnsweredBetweenTwoTimedCalls) {
  // In a child process (the stop flag is for the life of a process): SIGTERM arrives during the third
  // call of a measurement that would take a minute; the next call is never made.
  EXPECT_EXIT(
      {
        speedlabs::install_stop_handlers();
        int calls = 0;
        const auto start = std::chrono::steady_clock::now();
        try {
          speedlabs::time_interleaved({[&] {
                                        if (++calls == 3) kill(getpid(), SIGTERM);
                                        std::this_thread::sleep_for(std::chrono::milliseconds(100));
                                      }},
                                      c10::Device(c10::kCPU), {0, 600});
        } catch (const speedlabs::RuntimeFailure& e) {
          const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          std::fprintf(stderr, "%s after %d calls, %.1f s\n", e.what(), calls, seconds);
          std::exit(calls == 3 && seconds < 2 ? 0 : 1);
        }
        std::exit(1);
      },
      ::testing::ExitedWithCode(0), "interrupted while timing after 3 calls");
}
