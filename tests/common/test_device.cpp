#include <gtest/gtest.h>

#include "common/device.h"
#include "common/errors.h"

TEST(Device, AutoFollowsTheLessonsOrder) {
  const auto device = speedlabs::select_device("auto");
  if (speedlabs::cuda_available()) {
    EXPECT_TRUE(device.is_cuda());
  } else {
    EXPECT_FALSE(device.is_cuda());
  }
}

TEST(Device, CpuIsAlwaysThere) {
  EXPECT_TRUE(speedlabs::select_device("cpu").is_cpu());
  EXPECT_NE(speedlabs::describe(c10::Device(c10::kCPU)).find("cpu"), std::string::npos);
}

TEST(Device, CudaWithoutAGpuIsAUsageError) {
  if (speedlabs::cuda_available()) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_THROW(speedlabs::select_device("cuda"), speedlabs::UsageError);
}

TEST(Device, UnknownNameIsAUsageError) { EXPECT_THROW(speedlabs::select_device("tpu"), speedlabs::UsageError); }

TEST(Device, SynchronizeOnCpuIsHarmless) { EXPECT_NO_THROW(speedlabs::synchronize(c10::Device(c10::kCPU))); }

TEST(Device, VersionIsReported) { EXPECT_FALSE(speedlabs::libtorch_version().empty()); }
