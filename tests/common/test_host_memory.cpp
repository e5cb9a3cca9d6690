// common/host_memory: CPU tensor bytes counted exactly, and glibc keeping freed host memory for reuse.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/host_memory.h"

namespace {

using speedlabs::host_memory_stats;
using speedlabs::HostMemoryStats;

// Each test starts a phase of its own: the counter installed, the peak and the allocation count reset.
HostMemoryStats start_phase() {
  speedlabs::install_host_memory_counter();
  speedlabs::reset_host_memory_peak();
  return host_memory_stats();
}

TEST(HostMemory, ATensorMovesTheCountersByExactlyItsBytes) {
  const HostMemoryStats before = start_phase();
  EXPECT_EQ(before.peak_bytes, before.live_bytes);
  EXPECT_EQ(before.allocations, 0);
  {
    const auto tensor = torch::empty({1000, 3}, torch::kFloat32);
    const HostMemoryStats during = host_memory_stats();
    EXPECT_EQ(during.live_bytes - before.live_bytes, 12000);
    EXPECT_EQ(during.peak_bytes - before.live_bytes, 12000);
    EXPECT_EQ(during.allocations, 1);
  }
  const HostMemoryStats after = host_memory_stats();
  EXPECT_EQ(after.live_bytes, before.live_bytes);          // the free subtracts what the allocation added
  EXPECT_EQ(after.peak_bytes - before.live_bytes, 12000);  // the peak remembers it until the next reset
}

// Small and odd sizes are counted as asked, not as malloc rounds them (c10 aligns its buffers to 64 bytes).
TEST(HostMemory, SmallAndOddSizesAreCountedAsAsked) {
  for (const int64_t bytes : {1, 3, 63, 65, 4097}) {
    const HostMemoryStats before = start_phase();
    const auto tensor = torch::empty({bytes}, torch::kUInt8);
    EXPECT_EQ(host_memory_stats().live_bytes - before.live_bytes, bytes) << bytes << " bytes";
  }
  const HostMemoryStats before = start_phase();
  const auto scalar = torch::scalar_tensor(2.5, torch::kFloat64);  // a 0-d tensor still has 8 bytes of storage
  EXPECT_EQ(host_memory_stats().live_bytes - before.live_bytes, 8);
}

TEST(HostMemory, AnEmptyTensorIsNoAllocation) {
  const HostMemoryStats before = start_phase();
  const auto tensor = torch::empty({0, 7});
  EXPECT_EQ(host_memory_stats().live_bytes, before.live_bytes);
  EXPECT_EQ(host_memory_stats().allocations, 0);
}

// An operator's result is allocated like any tensor: a matmul of two 64x32 floats leaves a 64x64 result.
TEST(HostMemory, AnOperatorsResultIsCounted) {
  const auto a = torch::ones({64, 32});
  const HostMemoryStats before = start_phase();
  const auto product = torch::matmul(a, a.t());
  EXPECT_EQ(host_memory_stats().live_bytes - before.live_bytes, 64 * 64 * 4);
}

TEST(HostMemory, AResizeFreesTheOldBufferAndCountsTheNewOne) {
  speedlabs::install_host_memory_counter();  // first: a storage keeps the allocator it was made with
  auto tensor = torch::zeros({100});         // 400 bytes
  const HostMemoryStats before = start_phase();
  tensor.resize_({250});  // storage grows: 1000 bytes allocated, the 400 freed after the copy
  const HostMemoryStats after = host_memory_stats();
  EXPECT_EQ(after.live_bytes - before.live_bytes, 600);
  EXPECT_EQ(after.peak_bytes - before.live_bytes, 1000);  // old and new were alive together during the copy
  EXPECT_EQ(after.allocations, 1);
}

TEST(HostMemory, ResetMakesThePeakTheLiveBytes) {
  start_phase();
  { const auto big = torch::empty({1 << 20}); }  // 4 MiB, freed
  ASSERT_GE(host_memory_stats().peak_bytes - host_memory_stats().live_bytes, 4 << 20);
  speedlabs::reset_host_memory_peak();
  const HostMemoryStats after = host_memory_stats();
  EXPECT_EQ(after.peak_bytes, after.live_bytes);
  EXPECT_EQ(after.allocations, 0);
}

TEST(HostMemory, InstallingTwiceCountsOnce) {
  const HostMemoryStats before = start_phase();
  c10::Allocator* installed = c10::GetAllocator(c10::kCPU);
  speedlabs::install_host_memory_counter();
  EXPECT_EQ(c10::GetAllocator(c10::kCPU), installed);
  const auto tensor = torch::empty({256}, torch::kFloat64);
  EXPECT_EQ(host_memory_stats().live_bytes - before.live_bytes, 2048);
}

// A storage made before the install keeps libtorch's own allocator, also when it grows: never counted.
TEST(HostMemory, StorageFromBeforeTheInstallIsNotCounted) {
  auto tensor = torch::zeros({100});
  const HostMemoryStats before = start_phase();
  if (tensor.storage().allocator() == c10::GetAllocator(c10::kCPU)) GTEST_SKIP() << "installed before this test";
  tensor.resize_({250});
  EXPECT_EQ(host_memory_stats().live_bytes, before.live_bytes);
  tensor = torch::Tensor();  // its free is not subtracted either
  EXPECT_EQ(host_memory_stats().live_bytes, before.live_bytes);
}

// The raw interface (a pointer without a tensor, as some operators use for scratch space) still works.
TEST(HostMemory, RawAllocationsAreCountedAndFreed) {
  const HostMemoryStats before = start_phase();
  c10::Allocator* allocator = c10::GetAllocator(c10::kCPU);
  ASSERT_NE(allocator->raw_deleter(), nullptr);
  void* buffer = allocator->raw_allocate(500);
  EXPECT_EQ(host_memory_stats().live_bytes - before.live_bytes, 500);
  allocator->raw_deallocate(buffer);
  EXPECT_EQ(host_memory_stats().live_bytes, before.live_bytes);
}

TEST(HostMemory, CountersAreExactUnderConcurrentAllocations) {
  constexpr int kThreads = 4;
  constexpr int kTensorsPerThread = 500;
  const HostMemoryStats before = start_phase();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([] {
      std::vector<at::Tensor> kept;
      for (int i = 0; i < kTensorsPerThread; ++i) kept.push_back(torch::empty({16}, torch::kFloat32));
    });
  }
  for (auto& thread : threads) thread.join();
  const HostMemoryStats after = host_memory_stats();
  EXPECT_EQ(after.live_bytes, before.live_bytes);
  EXPECT_EQ(after.allocations, kThreads * kTensorsPerThread);
  EXPECT_GE(after.peak_bytes - before.live_bytes, kTensorsPerThread * 64);  // at least one thread's tensors at once
  EXPECT_LE(after.peak_bytes - before.live_bytes, kThreads * kTensorsPerThread * 64);
}

long minor_page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// A training step in miniature: three buffers of @p bytes live together, then all are freed, five times over.
// Returns the page faults of the last four rounds (the first may grow the heap). Plain malloc on this
// thread, so that only glibc's policy decides where the memory comes from.
long faults_of_repeated_rounds(size_t bytes) {
  const auto round = [bytes] {
    std::vector<char*> buffers;
    for (int i = 0; i < 3; ++i) {
      buffers.push_back(static_cast<char*>(std::malloc(bytes)));
      std::memset(buffers.back(), 1, bytes);  // touched: every page is faulted in unless it is resident
    }
    int sum = 0;
    for (char* buffer : buffers) {
      sum += *reinterpret_cast<volatile char*>(buffer + bytes - 1);  // read back: the writes are kept
      std::free(buffer);
    }
    return sum;
  };
  round();
  const long before = minor_page_faults();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(round(), 3);
  return minor_page_faults() - before;
}

TEST(HostMemory, KeptFreedHostMemoryIsReusedWithoutPageFaults) {
  if (std::getenv("MALLOC_MMAP_MAX_") || std::getenv("MALLOC_MMAP_THRESHOLD_") ||
      std::getenv("MALLOC_TRIM_THRESHOLD_")) {
    GTEST_SKIP() << "the environment already sets glibc's thresholds";
  }
  // glibc's defaults: the 24 MiB freed at the top of the heap exceed its trim threshold (twice the
  // largest buffer it has unmapped, 16 MiB), so it goes back to the kernel and faults in again.
  constexpr size_t kSmall = 8u << 20;
  // Above glibc's largest mmap threshold (32 MiB): mapped apart however high the threshold is set.
  constexpr size_t kLarge = 40u << 20;
  const long faults_by_default = faults_of_repeated_rounds(kSmall);
  const std::string said = speedlabs::keep_freed_host_memory();
  if (said.find("keeps freed memory") == std::string::npos) GTEST_SKIP() << said;
  EXPECT_STREQ(std::getenv("MALLOC_MMAP_MAX_"), "0");  // for child processes
  EXPECT_STREQ(std::getenv("MALLOC_TRIM_THRESHOLD_"), "1073741824");
  const long faults_kept = faults_of_repeated_rounds(kSmall);
  // Four rounds touch 96 MiB, 24,576 pages: reused memory faults a few times at most (tensor metadata).
  EXPECT_LT(faults_kept, 500) << "page faults with glibc's defaults: " << faults_by_default;
  // Four rounds of three 40 MiB buffers touch 122,880 pages; mapped apart, every one of them would fault.
  const long faults_kept_large = faults_of_repeated_rounds(kLarge);
  EXPECT_LT(faults_kept_large, 500);
  RecordProperty("faults_by_default", std::to_string(faults_by_default));
  RecordProperty("faults_kept", std::to_string(faults_kept));
  RecordProperty("faults_kept_large", std::to_string(faults_kept_large));
  // The setting is the caller's once made: a second call leaves it as the environment now says.
  EXPECT_NE(speedlabs::keep_freed_host_memory().find("as the environment sets it"), std::string::npos);
}

}  // namespace
