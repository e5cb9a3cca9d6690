// common/memory: the process's resident peak on the CPU, and no device statistics where there are none.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/device.h"
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

long minor_page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// A training step in miniature: three 8 MiB buffers live together, then all are freed, five times over.
// Returns the page faults of the last four rounds (the first may grow the heap). Plain malloc on this
// thread, so that only glibc's policy decides where the memory comes from.
long faults_of_repeated_rounds() {
  constexpr size_t kBytes = 8u << 20;
  const auto round = [] {
    std::vector<char*> buffers;
    for (int i = 0; i < 3; ++i) {
      buffers.push_back(static_cast<char*>(std::malloc(kBytes)));
      std::memset(buffers.back(), 1, kBytes);  // touched: every page is faulted in unless it is resident
    }
    int sum = 0;
    for (char* buffer : buffers) {
      sum += *reinterpret_cast<volatile char*>(buffer + kBytes - 1);  // read back: the writes are kept
      std::free(buffer);
    }
    return sum;
  };
  round();
  const long before = minor_page_faults();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(round(), 3);
  return minor_page_faults() - before;
}

TEST(Memory, KeptFreedHostMemoryIsReusedWithoutPageFaults) {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_")) {
    GTEST_SKIP() << "the environment already sets glibc's thresholds";
  }
  // glibc's defaults: the 24 MiB freed at the top of the heap exceed its trim threshold (twice the
  // largest buffer it has unmapped, 16 MiB), so it goes back to the kernel and faults in again.
  const long faults_by_default = faults_of_repeated_rounds();
  const std::string said = speedlabs::keep_freed_host_memory();
  if (said.find("keeps freed memory") == std::string::npos) GTEST_SKIP() << said;
  EXPECT_STREQ(std::getenv("MALLOC_MMAP_THRESHOLD_"), "33554432");  // for child processes
  EXPECT_STREQ(std::getenv("MALLOC_TRIM_THRESHOLD_"), "1073741824");
  const long faults_kept = faults_of_repeated_rounds();
  // Four rounds touch 96 MiB, 24,576 pages: reused memory faults a few times at most (tensor metadata).
  EXPECT_LT(faults_kept, 500) << "page faults with glibc's defaults: " << faults_by_default;
  RecordProperty("faults_by_default", std::to_string(faults_by_default));
  RecordProperty("faults_kept", std::to_string(faults_kept));
  // The setting is the caller's once made: a second call leaves it as the environment now says.
  EXPECT_NE(speedlabs::keep_freed_host_memory().find("as the environment sets it"), std::string::npos);
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

}  // namespace
