// Lab 04 graded tests: your measure() (labs/04_measure/exercise.cpp), on any machine, and your parallel
// reduction (labs/04_measure/reduction.cu), where a GPU is. Run them with ./lab check 04.
// No test asserts an absolute time from above except where the gap is hundreds of milliseconds:
// sleeps give lower bounds only.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/errors.h"
#include "exercise.h"
#include "tests/lab04/queued_device.h"
#include "tests/support/expect.h"
#ifdef SPEEDLABS_LAB04_CUDA_KERNEL
#include "common/cuda/kernels.h"
#include "reduction.h"
#endif

namespace {

using lab04::testing::QueuedDevice;
using std::chrono::milliseconds;

void sleep_ms(int ms) { std::this_thread::sleep_for(milliseconds(ms)); }

lab04::TorchDevice cpu() { return lab04::TorchDevice(c10::Device(c10::kCPU)); }

TEST(Lab04_measure, CallsWarmupThenRepeats) {
  int calls = 0;
  auto device = cpu();
  const auto stats = lab04::measure([&] { ++calls; }, device, {2, 5});
  EXPECT_EQ(calls, 7) << "measure(fn, cpu, {warmup 2, repeats 5}) should call fn 7 times";
  EXPECT_EQ(stats.samples_ms.size(), 5u) << "one sample per measured call, none for the warm-up";
}

TEST(Lab04_measure, WarmupStaysOutOfTheStatistics) {
  // Call 0 is the warm-up and sleeps 30 ms; the measured calls sleep 1, 9, 3, 7, 5 ms in that order.
  const std::vector<int> sleeps{30, 1, 9, 3, 7, 5};
  size_t call = 0;
  auto device = cpu();
  const auto stats = lab04::measure([&] { sleep_ms(sleeps.at(call++)); }, device, {1, 5});
  ASSERT_EQ(stats.samples_ms.size(), 5u);
  EXPECT_GE(stats.first_ms, 30.0) << "first_ms is the first (warm-up) call, which sleeps 30 ms";
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_GE(stats.samples_ms[i], sleeps[i + 1])
        << "sample " << i << " should be the call that sleeps " << sleeps[i + 1] << " ms: samples are in call order";
  }
  // The statistics are those of the samples themselves.
  std::vector<double> sorted = stats.samples_ms;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(stats.median_ms, sorted[2]) << "the median of the 5 samples";
  EXPECT_EQ(stats.min_ms, sorted.front()) << "the smallest sample";
  EXPECT_EQ(stats.max_ms, sorted.back()) << "the largest sample";
  EXPECT_GE(stats.median_ms, 5.0) << "at least three samples slept 5 ms or more; the warm-up must not count";
}

TEST(Lab04_measure, WithoutWarmupTheFirstCallIsTheFirstSample) {
  auto device = cpu();
  const auto stats = lab04::measure([] { sleep_ms(2); }, device, {0, 3});
  ASSERT_EQ(stats.samples_ms.size(), 3u);
  EXPECT_EQ(stats.first_ms, stats.samples_ms.front()) << "with warmup 0, first_ms is the first sample";
  EXPECT_GE(stats.min_ms, 2.0) << "every call sleeps 2 ms";
}

TEST(Lab04_measure, RejectsBadCounts) {
  auto device = cpu();
  EXPECT_THROW(lab04::measure([] {}, device, {0, 0}), speedlabs::UsageError) << "repeats 0";
  EXPECT_THROW(lab04::measure([] {}, device, {-1, 3}), speedlabs::UsageError) << "warmup -1";
}

TEST(Lab04_measure, WaitsForTheDeviceBeforeStoppingTheClock) {
  // Each call only queues 30 ms of work on the stand-in device and returns at once, like a kernel
  // launch; the work is done only when synchronize() returns.
  QueuedDevice device;
  const auto stats = lab04::measure([&] { device.submit(milliseconds(30)); }, device, {1, 3});
  ASSERT_EQ(stats.samples_ms.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_GE(stats.samples_ms[i], 30.0) << "sample " << i << " is " << stats.samples_ms[i]
                                         << " ms for a call whose queued work takes 30 ms ("
                                         << 30.0 - stats.samples_ms[i]
                                         << " ms short): the clock was read before device.synchronize() returned, "
                                         << "so it timed the queuing, not the work";
  }
  EXPECT_GT(device.synchronize_calls(), 0) << "measure() never called device.synchronize()";
  EXPECT_EQ(device.unfinished(), 0) << "measure() returned while work it timed was still running";
}

TEST(Lab04_measure, DoesNotBillEarlierWorkToTheFirstCall) {
  // 400 ms of work is queued before measure() starts; each call then adds 5 ms. Synchronizing before
  // starting the clock keeps the 400 ms out of every sample.
  QueuedDevice device;
  device.submit(milliseconds(400));
  const auto stats = lab04::measure([&] { device.submit(milliseconds(5)); }, device, {0, 3});
  ASSERT_EQ(stats.samples_ms.size(), 3u);
  EXPECT_LT(stats.samples_ms[0], 200.0)
      << "the first sample is " << stats.samples_ms[0] << " ms for a call whose own work takes 5 ms: the 400 ms "
      << "queued before measure() was billed to it; call device.synchronize() before starting the clock";
  EXPECT_GE(stats.min_ms, 5.0) << "each call's own 5 ms of work must be in its sample";
}

// --- measure_pair: two sides in rounds --------------------------------------------------------------

TEST(Lab04_measure_pair, AlternatesTheOrderRoundByRound) {
  std::string order;
  auto device = cpu();
  const auto pair = lab04::measure_pair([&] { order += 'A'; }, [&] { order += 'B'; }, device, {1, 4});
  EXPECT_EQ(order, "ABBAABBAAB") << "one warm-up round (A B), then four measured rounds: B A, A B, B A, A B; "
                                 << "rounds count from 0 with the warm-up, even rounds A first, odd rounds B first";
  EXPECT_EQ(pair.a.samples_ms.size(), 4u) << "one sample of A per measured round, none for the warm-up";
  EXPECT_EQ(pair.b.samples_ms.size(), 4u) << "one sample of B per measured round, none for the warm-up";
}

TEST(Lab04_measure_pair, TakesTheRatioWithinEachRound) {
  // A sleeps 20 ms longer in each new round than in the last, and B half as long as A: the machine "gets
  // busier" round by round, but within a round A takes twice B's time. Rounds: warm-up 0, measured 1..5.
  // Sleeps of tens of milliseconds: a wake-up a millisecond late (a busy virtual machine) moves a ratio by
  // under 5%, well inside the 0.15 spread below.
  int calls = 0;
  const auto round_of = [&] { return calls++ / 2; };
  auto device = cpu();
  const auto pair = lab04::measure_pair([&] { sleep_ms(20 + 20 * round_of()); },
                                        [&] { sleep_ms(10 + 10 * round_of()); }, device, {1, 5});
  ASSERT_EQ(pair.a.samples_ms.size(), 5u);
  ASSERT_EQ(pair.ratio.count, 5) << "one ratio per measured round";
  for (size_t r = 0; r < 5; ++r) {
    EXPECT_GE(pair.a.samples_ms[r], 20.0 + 20.0 * (r + 1))
        << "A's sample " << r << " should be round " << r + 1 << "'s call: samples are in call order";
  }
  EXPECT_NEAR(pair.ratio.median, 2.0, 0.25) << "A takes twice B's time in every round: the per-round ratio is 2, "
                                            << "whatever the rounds' own lengths (sleeps overshoot a little)";
  EXPECT_LT(pair.ratio.spread(), 0.15) << "the per-round ratio does not scatter although each side's times do";
  EXPECT_GT(pair.a.spread(), 0.3) << "A's own times rise round by round";
  EXPECT_GE(pair.a.first_ms, 20.0) << "first_ms is A's warm-up call";
}

TEST(Lab04_measure_pair, WaitsForTheDeviceAroundEveryCall) {
  QueuedDevice device;
  device.submit(milliseconds(300));  // queued before: must not land on the first call
  const auto pair = lab04::measure_pair([&] { device.submit(milliseconds(20)); },
                                        [&] { device.submit(milliseconds(10)); }, device, {0, 3});
  ASSERT_EQ(pair.a.samples_ms.size(), 3u);
  ASSERT_EQ(pair.b.samples_ms.size(), 3u);
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_GE(pair.a.samples_ms[r], 20.0) << "A queues 20 ms of work; its sample " << r << " is "
                                          << pair.a.samples_ms[r] << " ms: synchronize before stopping the clock";
    EXPECT_GE(pair.b.samples_ms[r], 10.0) << "B queues 10 ms of work; its sample " << r << " is "
                                          << pair.b.samples_ms[r] << " ms: synchronize before stopping the clock";
  }
  EXPECT_LT(pair.a.samples_ms[0], 200.0) << "the 300 ms queued before measure_pair() was billed to A's first call: "
                                         << "synchronize before starting the clock";
  EXPECT_EQ(device.unfinished(), 0) << "measure_pair() returned while work it timed was still running";
}

TEST(Lab04_measure_pair, RejectsBadCounts) {
  auto device = cpu();
  EXPECT_THROW(lab04::measure_pair([] {}, [] {}, device, {0, 0}), speedlabs::UsageError) << "repeats 0";
  EXPECT_THROW(lab04::measure_pair([] {}, [] {}, device, {-1, 3}), speedlabs::UsageError) << "warmup -1";
}

// --- the parallel reduction, graded where a GPU is ----------------------------------------------------

#ifdef SPEEDLABS_LAB04_CUDA_KERNEL
// Your reduction on n host doubles: copied to the GPU, launched once, the sum copied back.
double reduction_sum(const double* x, int64_t n) {
  return speedlabs::cuda::sum_squares(x, n, lab04::launch_sum_squares_reduction, 0, 1).sum;
}
#endif

// Skips the calling test, with the reason, where the reduction cannot run here.
#ifdef SPEEDLABS_LAB04_CUDA_KERNEL
#define SKIP_WITHOUT_A_GPU()                                                  \
  do {                                                                        \
    const auto gpus = speedlabs::cuda::find_gpus();                           \
    if (gpus.count == 0) GTEST_SKIP() << "needs a CUDA GPU: " << gpus.reason; \
  } while (0)
#else
#define SKIP_WITHOUT_A_GPU() \
  GTEST_SKIP() << "built without a CUDA compiler (nvcc not found at configure time): the kernel is not compiled here"
#endif

TEST(Lab04_launch_sum_squares_reduction, ExactOnEverySizeShape) {
  SKIP_WITHOUT_A_GPU();
#ifdef SPEEDLABS_LAB04_CUDA_KERNEL
  // Small integers: their squares and every partial sum are integers below 2^53, exact in any order.
  // The sizes: one element, less than a block, a block and one more, more elements than the largest
  // grid has threads (so the grid-stride loop must go round), and a prime.
  for (int64_t n : {1, 3, 255, 256, 257, 1000, 1024 * 256 + 1, 1'000'003}) {
    std::vector<double> x(n);
    double expected = 0;
    for (int64_t i = 0; i < n; ++i) {
      x[i] = static_cast<double>(i % 7) - 3.0;
      expected += x[i] * x[i];
    }
    EXPECT_TRUE(speedlabs::testing::numbers_close(reduction_sum(x.data(), n), expected, 0, 0,
                                                  "sum of squares of " + std::to_string(n) + " small integers"));
  }
#endif
}

TEST(Lab04_launch_sum_squares_reduction, MatchesTheCpuOnRandomData) {
  SKIP_WITHOUT_A_GPU();
#ifdef SPEEDLABS_LAB04_CUDA_KERNEL
  const int64_t n = 1 << 20;
  torch::manual_seed(0);
  const torch::Tensor x = torch::randn({n}, torch::kFloat64);
  const double* data = x.data_ptr<double>();
  double cpu = 0;
  for (int64_t i = 0; i < n; ++i) cpu += data[i] * data[i];
  // Positive terms in different orders: within n*eps = 1.2e-10 relative; 1e-9 leaves a margin.
  EXPECT_TRUE(speedlabs::testing::numbers_close(reduction_sum(data, n), cpu, 0, 1e-9,
                                                "sum of squares of 2^20 N(0,1) doubles vs the CPU"));
#endif
}

TEST(Lab04_launch_sum_squares_reduction, AtLeast100xFasterThanOneThread) {
  SKIP_WITHOUT_A_GPU();
#ifdef SPEEDLABS_LAB04_CUDA_KERNEL
  const int64_t n = 1 << 20;
  const std::vector<double> x(n, 1.0);
  const auto serial = speedlabs::cuda::sum_squares(x.data(), n, speedlabs::cuda::launch_sum_squares_one_thread, 1, 3);
  const auto parallel = speedlabs::cuda::sum_squares(x.data(), n, lab04::launch_sum_squares_reduction, 1, 3);
  const double serial_ms = speedlabs::summarize(serial.times_ms).median_ms;
  const double parallel_ms = speedlabs::summarize(parallel.times_ms).median_ms;
  // A ratio is asserted only because it is huge: one thread against a whole GPU is 1000x and more.
  EXPECT_GE(serial_ms / parallel_ms, 100.0)
      << "your reduction took " << parallel_ms << " ms for 2^20 doubles, one GPU thread " << serial_ms << " ms: only "
      << serial_ms / parallel_ms << "x faster; use many blocks of many threads";
#endif
}

}  // namespace
