#include <gtest/gtest.h>

#include <thread>

#include "common/errors.h"
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
