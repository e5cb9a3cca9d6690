// Lab 03 below 16 bits: per-tensor fp8 scaling, on tensors whose fp8 values are known exactly, and over the
// lab's training run.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>

#include "experiment.h"
#include "fp8_matmul.h"
#include "fp8_scaling.h"

namespace {

TEST(Lab03Fp8, LargestValuesAndScales) {
  EXPECT_EQ(lab03::fp8_max(at::kFloat8_e4m3fn), 448.0);
  EXPECT_EQ(lab03::fp8_max(at::kFloat8_e5m2), 57344.0);
  EXPECT_EQ(lab03::per_tensor_scale(4.0, at::kFloat8_e4m3fn), 112.0);
  EXPECT_EQ(lab03::per_tensor_scale(0.0, at::kFloat8_e4m3fn), 1.0);  // an all-zero tensor needs no scale
}

TEST(Lab03Fp8, CastLossCountsSaturatedAndFlushedValues) {
  // e4m3fn: 1 and 0.5 are exact; 1000 is past 448's rounding range (464); 2^-12 is below half of 2^-9: it flushes.
  const auto x = torch::tensor({1.0f, 0.5f, 1000.0f, std::ldexp(1.0f, -12)});
  const auto raw = lab03::cast_through_fp8(x, 1.0, at::kFloat8_e4m3fn);
  EXPECT_DOUBLE_EQ(raw.saturated, 0.25);
  EXPECT_DOUBLE_EQ(raw.flushed, 0.25);
  // 460 rounds to 448 (within half a step of it): rounding, not saturation.
  EXPECT_EQ(lab03::cast_through_fp8(torch::tensor({460.0f}), 1.0, at::kFloat8_e4m3fn).saturated, 0.0);
  // Scaled by 448 / 1000, 1000 lands on 448 exactly and 2^-12 * 0.448 still flushes.
  const auto scaled =
      lab03::cast_through_fp8(x, lab03::per_tensor_scale(1000.0, at::kFloat8_e4m3fn), at::kFloat8_e4m3fn);
  EXPECT_EQ(scaled.saturated, 0.0);
  EXPECT_DOUBLE_EQ(scaled.flushed, 0.25);
  EXPECT_EQ(lab03::cast_through_fp8(torch::tensor({1.0f, 2.0f}), 1.0, at::kFloat8_e4m3fn).relative_error, 0.0);
}

TEST(Lab03Fp8, ScalingOverTheQuickRun) {
  const auto config = lab03::quick_config();
  const auto run = lab03::fp8_scaling_over_training(config);
  EXPECT_EQ(run.steps, config.steps - 1);  // the first step has no history for the delayed scale
  EXPECT_EQ(run.current_saturated_steps, 0);
  EXPECT_EQ(run.current.saturated, 0.0);
  EXPECT_LE(run.current.flushed, run.raw.flushed);
  speedlabs::Report report("03_mixed_precision", "cpu");
  lab03::observe_fp8_scaling(config, report);
  EXPECT_EQ(report.at("fp8_current_scaling_keeps_range").verdict, speedlabs::Verdict::holds);
  EXPECT_FALSE(report.at("fp8_delayed_scaling_shares").must_hold);
}

}  // namespace

// Without a GPU the fp8 matmul says why it did not run, never a pass.
TEST(Lab03Fp8Matmul, OnTheCpuItSaysWhyItDidNotRun) {
  speedlabs::Report report("03_mixed_precision", "cpu");
  lab03::observe_fp8_scaled_mm(c10::Device(c10::kCPU), report);
  const auto& o = report.at("fp8_scaled_mm_vs_bf16");
  EXPECT_EQ(o.verdict, speedlabs::Verdict::not_applicable);
  EXPECT_NE(o.reason.find("CUDA"), std::string::npos) << o.reason;
}
