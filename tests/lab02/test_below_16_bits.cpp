// Lab 02 below 16 bits: the 8-bit formats from their layouts and from libtorch, and bf16 weights kept by
// rounding to nearest, stochastic rounding and Kahan compensation, through the functions the program runs.
#include <gtest/gtest.h>

#include <torch/types.h>

#include <cmath>
#include <limits>
#include <vector>

#include "experiment.h"
#include "fp8.h"
#include "low_precision_updates.h"

namespace {

// Every fp8 value is a power of two times a 3- or 4-bit integer: float holds each exactly, so these are exact.
double two_to(int power) { return std::ldexp(1.0, power); }

TEST(Lab02Fp8, LayoutDecodesTheNamedPatterns) {
  const auto e4m3 = lab02::e4m3fn_layout();
  EXPECT_EQ(lab02::fp8_value_from_layout(e4m3, 0x38), 1.0f);    // exponent 7 = bias
  EXPECT_EQ(lab02::fp8_value_from_layout(e4m3, 0x39), 1.125f);  // + 2^-3
  EXPECT_EQ(lab02::fp8_value_from_layout(e4m3, 0x7e), 448.0f);  // S.1111.110: the all-ones exponent is a number
  EXPECT_EQ(lab02::fp8_value_from_layout(e4m3, 0xfe), -448.0f);
  EXPECT_TRUE(std::isnan(lab02::fp8_value_from_layout(e4m3, 0x7f)));  // S.1111.111: the only NaN
  EXPECT_TRUE(std::isnan(lab02::fp8_value_from_layout(e4m3, 0xff)));
  EXPECT_EQ(lab02::fp8_value_from_layout(e4m3, 0x08), two_to(-6));  // smallest normal
  EXPECT_EQ(lab02::fp8_value_from_layout(e4m3, 0x01), two_to(-9));  // smallest subnormal

  const auto e5m2 = lab02::e5m2_layout();
  EXPECT_EQ(lab02::fp8_value_from_layout(e5m2, 0x3c), 1.0f);  // exponent 15 = bias
  EXPECT_EQ(lab02::fp8_value_from_layout(e5m2, 0x7b), 57344.0f);
  EXPECT_EQ(lab02::fp8_value_from_layout(e5m2, 0x7c), std::numeric_limits<float>::infinity());
  EXPECT_EQ(lab02::fp8_value_from_layout(e5m2, 0xfc), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(lab02::fp8_value_from_layout(e5m2, 0x7d)));
  EXPECT_EQ(lab02::fp8_value_from_layout(e5m2, 0x04), two_to(-14));
  EXPECT_EQ(lab02::fp8_value_from_layout(e5m2, 0x01), two_to(-16));
}

std::vector<float> layout_values(const lab02::Fp8Layout& layout) {
  std::vector<float> values;
  for (int bits = 0; bits < 256; ++bits)
    values.push_back(lab02::fp8_value_from_layout(layout, static_cast<uint8_t>(bits)));
  return values;
}

TEST(Lab02Fp8, LimitsFromTheLayout) {
  const auto e4m3 = lab02::fp8_limits(layout_values(lab02::e4m3fn_layout()));
  EXPECT_EQ(e4m3.max, 448.0);
  EXPECT_EQ(e4m3.smallest_normal, two_to(-6));
  EXPECT_EQ(e4m3.smallest_subnormal, two_to(-9));
  EXPECT_EQ(e4m3.epsilon, two_to(-3));
  EXPECT_FALSE(e4m3.has_infinity);
  EXPECT_EQ(e4m3.nan_patterns, 2);

  const auto e5m2 = lab02::fp8_limits(layout_values(lab02::e5m2_layout()));
  EXPECT_EQ(e5m2.max, 57344.0);
  EXPECT_EQ(e5m2.smallest_normal, two_to(-14));
  EXPECT_EQ(e5m2.smallest_subnormal, two_to(-16));
  EXPECT_EQ(e5m2.epsilon, two_to(-2));
  EXPECT_TRUE(e5m2.has_infinity);
  EXPECT_EQ(e5m2.nan_patterns, 6);  // exponent 11111 with mantissa 01, 10, 11, of both signs
}

TEST(Lab02Fp8, LibtorchDecodesEveryPatternAsTheLayout) {
  for (const auto& layout : {lab02::e4m3fn_layout(), lab02::e5m2_layout()}) {
    const auto torch_values = lab02::fp8_values_in_libtorch(layout.dtype);
    ASSERT_EQ(torch_values.size(), 256u);
    for (int bits = 0; bits < 256; ++bits) {
      const float expected = lab02::fp8_value_from_layout(layout, static_cast<uint8_t>(bits));
      if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(torch_values[bits])) << layout.name << " pattern " << bits;
      } else {
        EXPECT_EQ(torch_values[bits], expected) << layout.name << " pattern " << bits;
      }
    }
  }
}

TEST(Lab02Fp8, EpsilonByRoundingMatchesEveryFormat) {
  EXPECT_EQ(lab02::epsilon_by_rounding(at::kFloat8_e4m3fn), two_to(-3));
  EXPECT_EQ(lab02::epsilon_by_rounding(at::kFloat8_e5m2), two_to(-2));
  EXPECT_EQ(lab02::epsilon_by_rounding(at::kHalf), two_to(-10));
  EXPECT_EQ(lab02::epsilon_by_rounding(at::kBFloat16), two_to(-7));
}

TEST(Lab02Fp8, RoundsToNearestEvenBelowTheLimits) {
  EXPECT_EQ(lab02::round_in_tensor(480.0f, at::kFloat8_e5m2), 512.0f);   // a tie between 448 and 512: even wins
  EXPECT_EQ(lab02::round_in_tensor(1.0625f, at::kFloat8_e4m3fn), 1.0f);  // a tie between 1 and 1.125
  EXPECT_EQ(lab02::round_in_tensor(static_cast<float>(two_to(-10)), at::kFloat8_e4m3fn), 0.0f);  // half of 2^-9
  EXPECT_EQ(lab02::round_in_tensor(1.01f * static_cast<float>(two_to(-10)), at::kFloat8_e4m3fn), two_to(-9));
  EXPECT_EQ(lab02::round_in_tensor(static_cast<float>(two_to(-17)), at::kFloat8_e5m2), 0.0f);  // half of 2^-16
  EXPECT_EQ(lab02::round_in_tensor(61440.0f, at::kFloat8_e5m2), std::numeric_limits<float>::infinity());
}

speedlabs::Report lab_report(int steps = 1000) {
  speedlabs::Report report("02_float16_limits", "cpu");
  lab02::Config config;
  config.update_steps = steps;
  lab02::run(config, report);
  return report;
}

TEST(Lab02Observations, BelowSixteenBitsHold) {
  const auto report = lab_report();
  for (const char* id : {"fp8_e4m3_limits_match_layout", "fp8_e5m2_limits_match_layout", "fp8_e4m3_500_and_1e-6",
                         "fp8_e5m2_500_and_1e-6", "round_to_nearest_loses_update", "stochastic_rounding_unbiased",
                         "kahan_bf16_tracks_fp32", "bytes_per_parameter"}) {
    ASSERT_TRUE(report.has(id)) << id;
    EXPECT_EQ(report.at(id).verdict, speedlabs::Verdict::holds) << id;
    EXPECT_TRUE(report.at(id).must_hold) << id;
  }
  const auto& e4m3 = report.at("fp8_e4m3_500_and_1e-6").measured["tensor"];
  EXPECT_NE(e4m3["500"], "inf");  // no infinity in e4m3fn: 448 (saturated) or NaN, the library's choice
  EXPECT_EQ(e4m3["1e-6"], 0.0);
  const auto& e5m2 = report.at("fp8_e5m2_500_and_1e-6").measured["tensor"];
  EXPECT_EQ(e5m2["500"], 512.0);
  EXPECT_EQ(e5m2["1e-6"], 0.0);
  EXPECT_EQ(e5m2["inf"], "inf");
  EXPECT_EQ(report.at("fp8_e4m3_limits_match_layout").measured["libtorch"]["max"], 448.0);
  EXPECT_EQ(report.at("fp8_e5m2_limits_match_layout").measured["patterns_decoded_alike"], 256);
  EXPECT_EQ(report.at("round_to_nearest_loses_update").measured["bf16 round to nearest"], 1.0);
  EXPECT_EQ(report.at("bytes_per_parameter").measured["bf16 Kahan (weight + compensation)"], 4);
}

TEST(Lab02Observations, BelowSixteenBitsHoldForFewAndManySteps) {
  for (int steps : {1, 50, 20000}) {
    const auto report = lab_report(steps);
    for (const char* id : {"round_to_nearest_loses_update", "stochastic_rounding_unbiased", "kahan_bf16_tracks_fp32"})
      EXPECT_EQ(report.at(id).verdict, speedlabs::Verdict::holds) << id << " after " << steps << " steps";
  }
}

// An update of exactly one bf16 step at 1 (2^-7) needs no rounding: every way keeps it exactly.
TEST(Lab02Updates, AWholeStepIsKeptByEveryWay) {
  const float step = static_cast<float>(two_to(-7));
  const auto run = lab02::run_updates(1.0f, step, 10, 1);
  const float expected = 1.0f + 10 * step;
  EXPECT_EQ(run.fp32, expected);
  EXPECT_EQ(run.nearest, expected);
  EXPECT_EQ(lab02::bfloat16_value(run.kahan.weight), expected);
  for (float w : run.stochastic) ASSERT_EQ(w, expected);  // no dropped bits: the random bits never carry
}

// Half a step (2^-8) is a tie: to nearest even keeps 1 forever; Kahan holds the half in its compensation and
// lands on fp32 exactly after every second step.
TEST(Lab02Updates, HalfAStepIsLostToNearestButKeptByKahan) {
  const float half_step = static_cast<float>(two_to(-8));
  const auto run = lab02::run_updates(1.0f, half_step, 10, 1);
  EXPECT_EQ(run.nearest, 1.0f);
  EXPECT_EQ(lab02::bfloat16_value(run.kahan.weight), run.fp32);
  EXPECT_EQ(run.kahan.compensation, 0);
  lab02::KahanBFloat16 pair{0x3f80, 0};
  lab02::kahan_add(pair, half_step);
  EXPECT_EQ(pair.weight, 0x3f80);                                  // 1 + 2^-8 rounds to the even 1 ...
  EXPECT_EQ(lab02::bfloat16_value(pair.compensation), half_step);  // ... and the half step waits here
}

TEST(Lab02Updates, StochasticMeanIsTheFp32Weight) {
  const auto run = lab02::run_updates(1.0f, 1e-4f, 1000, 7);
  ASSERT_EQ(run.stochastic.size(), static_cast<size_t>(lab02::kStochasticWeights));
  double mean = 0;
  for (float w : run.stochastic) mean += w;
  mean /= run.stochastic.size();
  // Each weight's spread after 1000 steps is about sqrt(1000 * 0.0128) * 2^-7 = 0.028 (a Bernoulli step of 2^-7
  // with probability 1e-4 / 2^-7 per update); the mean of 1024 is within 4 * 0.028 / 32 of fp32's.
  EXPECT_NEAR(mean, run.fp32, 4 * 0.028 / 32);
  EXPECT_EQ(run.nearest, 1.0f);
}

TEST(Lab02Updates, KahanBoundFollowsTheSteps) {
  // Weights in [1, 2): a bf16 step is 2^-7, a float32 step 2^-23.
  EXPECT_DOUBLE_EQ(lab02::kahan_bound(1000, 1.1), 1000 * (two_to(-16) + 1.5 * two_to(-23)) + two_to(-8));
  EXPECT_DOUBLE_EQ(lab02::kahan_bound(0, 3.0), two_to(-7));  // [2, 4): half of 2^-6
}

}  // namespace
