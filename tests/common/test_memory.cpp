// common/memory: the process's resident peak on the CPU, no device statistics where there are none, and the
// meter of the bytes tensors hold.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cstring>
#include <vector>

#include "common/device.h"
#include "common/errors.h"
#include "common/memory.h"

namespace {

const c10::Device kCpu(c10::kCPU);

TEST(Memory, PeakRssGrowsWhenALargeBufferIsTouched) {
  if (!speedlabs::reset_peak_rss() || !speedlabs::current_rss_bytes()) GTEST_SKIP() << "no resettable peak RSS here";
  const int64_t before = *speedlabs::current_rss_bytes();
  constexpr size_t kBytes = 64u << 20;
  std::vector<char> buffer(kBytes);
  std::memset(buffer.data(), 1, buffer.size());  // touched pages become resident
  // Pages of the buffer may be reused from freed memory already counted in `before`, hence 3/4.
  EXPECT_GE(*speedlabs::peak_rss_bytes() - before, static_cast<int64_t>(kBytes) * 3 / 4);
  EXPECT_GE(*speedlabs::peak_rss_bytes(), *speedlabs::current_rss_bytes());
  EXPECT_EQ(buffer[kBytes - 1], 1);
}

TEST(Memory, PeakRssResetForgetsAFreedBuffer) {
  if (!speedlabs::reset_peak_rss() || !speedlabs::current_rss_bytes()) GTEST_SKIP() << "no resettable peak RSS here";
  constexpr size_t kBytes = 64u << 20;
  {
    std::vector<char> buffer(kBytes);
    std::memset(buffer.data(), 1, buffer.size());
    ASSERT_GE(*speedlabs::peak_rss_bytes(), *speedlabs::current_rss_bytes());
  }  // glibc maps a buffer this large on its own (above its 32 MiB mmap threshold) and unmaps it when freed
  ASSERT_TRUE(speedlabs::reset_peak_rss());
  // After the reset the peak starts again from what is resident now, so it no longer covers the buffer.
  EXPECT_LT(*speedlabs::peak_rss_bytes() - *speedlabs::current_rss_bytes(), static_cast<int64_t>(kBytes) / 2);
}

TEST(Memory, TheCpuAllocatorKeepsNoPeak) {
  EXPECT_NO_THROW(speedlabs::reset_peak_memory(kCpu));
  [[maybe_unused]] const auto tensor = torch::ones({1 << 20});  // allocated, yet no statistics to report
  EXPECT_FALSE(speedlabs::peak_memory_bytes(kCpu).has_value());
}

TEST(Memory, CudaPeakCountsAnAllocation) {
  if (!speedlabs::cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  const c10::Device cuda(c10::kCUDA, 0);
  speedlabs::reset_peak_memory(cuda);
  const auto baseline = speedlabs::peak_memory_bytes(cuda);
  ASSERT_TRUE(baseline.has_value());
  constexpr int64_t kFloats = 16 << 20;  // 64 MiB
  {
    const auto tensor = torch::zeros({kFloats}, torch::TensorOptions().device(cuda));
    speedlabs::synchronize(cuda);
  }
  EXPECT_GE(*speedlabs::peak_memory_bytes(cuda) - *baseline, kFloats * 4);
  speedlabs::reset_peak_memory(cuda);  // the tensor is freed: the new peak is below it
  EXPECT_LT(*speedlabs::peak_memory_bytes(cuda) - *baseline, kFloats * 4);
}

TEST(TensorMemoryMeter, CountsCpuTensorsLiveAndAtTheirPeak) {
  ASSERT_TRUE(speedlabs::TensorMemoryMeter::can_measure(kCpu));
  speedlabs::TensorMemoryMeter meter(kCpu);  // installs the counting allocator: tensors from here on are counted
  const int64_t before = meter.live();
  const auto kept = torch::zeros({1024});
  EXPECT_EQ(meter.live() - before, 1024 * 4);
  // A call's temporary counts in its extra peak; what was live before the call does not.
  EXPECT_EQ(meter.extra_peak_bytes([] { [[maybe_unused]] const auto temporary = torch::zeros({4096}); }), 4096 * 4);
  EXPECT_EQ(meter.live() - before, 1024 * 4);
  meter.reset_peak();
  EXPECT_EQ(meter.peak(), meter.live());
  EXPECT_FALSE(meter.reserved().has_value()) << "the CPU allocator caches nothing";
  EXPECT_EQ(kept.numel(), 1024);
}

#ifndef SPEEDLABS_TORCH_HAS_CUDA
TEST(TensorMemoryMeter, RefusesADeviceWithoutStatistics) {
  const c10::Device cuda(c10::kCUDA, 0);  // no CUDA allocator in this libtorch
  EXPECT_FALSE(speedlabs::TensorMemoryMeter::can_measure(cuda));
  EXPECT_THROW(speedlabs::TensorMemoryMeter{cuda}, speedlabs::UsageError);
}
#endif

TEST(TensorMemoryMeter, CountsACudaAllocationLikeTheCpus) {
  if (!speedlabs::cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  const c10::Device cuda(c10::kCUDA, 0);
  speedlabs::TensorMemoryMeter meter(cuda);
  const int64_t before = meter.live();
  const auto kept = torch::zeros({1 << 20}, torch::TensorOptions().device(cuda));
  EXPECT_EQ(meter.live() - before, (1 << 20) * 4);
  EXPECT_GE(meter.extra_peak_bytes([&] { [[maybe_unused]] const auto temporary = kept * 2; }), (1 << 20) * 4);
  ASSERT_TRUE(meter.reserved().has_value());
  EXPECT_GE(*meter.reserved(), meter.live());
}

}  // namespace
