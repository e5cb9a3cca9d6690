// Lab 09 on a GPU: the GPU observations of a --quick run (the kernel itself is graded in graded.cpp).
// The test skips, saying why, where there is no GPU or the kernel was not compiled (no nvcc).
#include <gtest/gtest.h>
#include <torch/types.h>

#include "common/device.h"
#include "common/observations.h"
#include "experiment.h"
#include "gpu_comparison.h"
#include "tests/lab09/require_gpu_kernel.h"
#include "tests/support/timed.h"

namespace {

TEST(Lab09Gpu, QuickRunObservationsOnTheGpu) {
  LAB09_REQUIRE_GPU_KERNEL();
  speedlabs::Report report("09_flash_attention", "cuda");
  lab09::Config config = lab09::quick_config();
  config.progress_bar = false;
  lab09::compare_on_gpu(config, c10::Device(c10::kCUDA), report);
  const auto& match = report.at("cuda_kernel_matches_sdpa");
  EXPECT_EQ(match.verdict, speedlabs::Verdict::holds) << match.measured.dump() << " " << match.reason;
  const auto& time = report.at("cuda_kernel_vs_sdpa_time");
  // Timed interleaved with SDPA's backends and reported: decided from its evidence, or 'could not decide'
  // with the reason on a busy machine, never a verdict from noise.
  EXPECT_TRUE(speedlabs::testing::timed_with_evidence(time));
  EXPECT_NE(time.verdict, speedlabs::Verdict::fails) << time.reason;
  EXPECT_NE(time.verdict, speedlabs::Verdict::not_applicable) << time.reason;
  EXPECT_GT(time.measured["kernel_ms"].get<double>(), 0.0);
}

}  // namespace
