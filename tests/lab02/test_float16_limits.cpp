// Lab 02: the format table, the experiment's rounding (your bits and both libraries' types) on cases
// beyond the lesson's, every observation through the same experiment the program runs, and the full
// sweep of all 2^32 floats through the conversions (graded.cpp checks a student's code on a faster subset).
#include <gtest/gtest.h>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <Eigen/Core>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "exercise.h"
#include "experiment.h"

namespace {

// Every value below is a power of two or a short binary fraction, so float holds it exactly and
// the comparisons are exact: rounding to a format is deterministic (IEEE 754 round to nearest even).
const double kInf = std::numeric_limits<double>::infinity();

lab02::FormatRow row(lab02::Library library, const std::string& name) {
  for (const auto& r : lab02::format_table(library))
    if (r.name == name) return r;
  ADD_FAILURE() << "no row " << name;
  return {};
}

TEST(Lab02Table, ValuesFromTheTypes) {
  for (auto library : {lab02::Library::eigen, lab02::Library::libtorch}) {
    const auto fp32 = row(library, "fp32");
    EXPECT_EQ(fp32.exponent_bits, 8);
    EXPECT_EQ(fp32.mantissa_bits, 23);
    EXPECT_EQ(fp32.smallest_normal, std::ldexp(1.0, -126));
    EXPECT_EQ(fp32.epsilon, std::ldexp(1.0, -23));
    EXPECT_EQ(fp32.storage_bytes, 4);

    const auto fp16 = row(library, "fp16");
    EXPECT_EQ(fp16.sign_bits, 1);
    EXPECT_EQ(fp16.exponent_bits, 5);
    EXPECT_EQ(fp16.mantissa_bits, 10);
    EXPECT_EQ(fp16.max, 65504.0);
    EXPECT_EQ(fp16.smallest_normal, std::ldexp(1.0, -14));
    EXPECT_EQ(fp16.epsilon, std::ldexp(1.0, -10));
    EXPECT_EQ(fp16.storage_bytes, 2);

    const auto bf16 = row(library, "bf16");
    EXPECT_EQ(bf16.sign_bits, 1);
    EXPECT_EQ(bf16.exponent_bits, 8);
    EXPECT_EQ(bf16.mantissa_bits, 7);
    EXPECT_EQ(bf16.epsilon, 0.0078125);
    EXPECT_NEAR(bf16.max, 3.3895e38, 0.0001e38);
    EXPECT_EQ(bf16.smallest_normal, fp32.smallest_normal);  // same exponent as float32
    EXPECT_EQ(bf16.storage_bytes, 2);

    const auto tf32 = row(library, "tf32");
    EXPECT_EQ(tf32.exponent_bits, 8);
    EXPECT_EQ(tf32.mantissa_bits, 10);
    EXPECT_EQ(tf32.epsilon, fp16.epsilon);                  // fp16's precision ...
    EXPECT_EQ(tf32.smallest_normal, fp32.smallest_normal);  // ... with fp32's range
    EXPECT_NE(tf32.source.find("1/8/10"), std::string::npos);
  }
}

TEST(Lab02Table, LayoutFormulaReproducesFloat32) {
  const auto fp32 = lab02::format_from_layout("fp32", 8, 23, 4);
  EXPECT_EQ(fp32.max, static_cast<double>(std::numeric_limits<float>::max()));
  EXPECT_EQ(fp32.smallest_normal, static_cast<double>(std::numeric_limits<float>::min()));
  EXPECT_EQ(fp32.epsilon, static_cast<double>(std::numeric_limits<float>::epsilon()));
}

template <typename T>
class Lab02Half : public ::testing::Test {};
template <typename T>
class Lab02BFloat : public ::testing::Test {};
using HalfTypes = ::testing::Types<lab02::YourHalf, Eigen::half, at::Half>;
using BFloatTypes = ::testing::Types<lab02::YourBFloat16, Eigen::bfloat16, at::BFloat16>;
TYPED_TEST_SUITE(Lab02Half, HalfTypes);
TYPED_TEST_SUITE(Lab02BFloat, BFloatTypes);

TYPED_TEST(Lab02Half, RoundsToNearestEven) {
  EXPECT_EQ(lab02::round_to<TypeParam>(2049.0f), 2048.0f);  // halfway between 2048 and 2050: even wins
  EXPECT_EQ(lab02::round_to<TypeParam>(2051.0f), 2052.0f);  // halfway between 2050 and 2052: even wins
  EXPECT_EQ(lab02::round_to<TypeParam>(65504.0f), 65504.0f);
  EXPECT_EQ(lab02::round_to<TypeParam>(65520.0f), kInf);  // halfway to the next power of two overflows
  EXPECT_EQ(lab02::round_to<TypeParam>(-70000.0f), -kInf);
  EXPECT_EQ(lab02::round_to<TypeParam>(std::ldexp(1.0f, -24)), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(lab02::round_to<TypeParam>(std::ldexp(1.0f, -26)), 0.0f);
}

TYPED_TEST(Lab02Half, AddsInItsOwnPrecision) {
  EXPECT_EQ(lab02::add_in<TypeParam>(1000.0f, 0.3f), 1000.5f);
  EXPECT_EQ(lab02::add_in<TypeParam>(2048.0f, 1.0f), 2048.0f);  // 2049 is not a float16
  EXPECT_EQ(lab02::add_in<TypeParam>(1.0f, std::ldexp(1.0f, -10)), 1.0f + std::ldexp(1.0f, -10));
  EXPECT_EQ(lab02::add_in<TypeParam>(60000.0f, 10000.0f), kInf);  // both operands fit; the sum does not
}

TYPED_TEST(Lab02Half, UpdatesAccumulateOnlyWhenBigEnough) {
  EXPECT_EQ(lab02::accumulate_updates<TypeParam>(1.0f, 1e-4f, 500), 1.0f);
  // 2^-10 is exactly one float16 step at 1, so each of these updates lands.
  EXPECT_EQ(lab02::accumulate_updates<TypeParam>(1.0f, std::ldexp(1.0f, -10), 4), 1.0f + std::ldexp(1.0f, -8));
  EXPECT_EQ(lab02::accumulate_updates<TypeParam>(3.0f, 1.0f, 0), 3.0f);
}

TYPED_TEST(Lab02BFloat, RoundsToNearestEven) {
  EXPECT_EQ(lab02::round_to<TypeParam>(1.0f + std::ldexp(1.0f, -8)), 1.0f);  // a tie: 1 has the even last bit
  EXPECT_EQ(lab02::round_to<TypeParam>(1.0f + 3 * std::ldexp(1.0f, -9)), 1.0f + std::ldexp(1.0f, -7));
  EXPECT_EQ(lab02::round_to<TypeParam>(70000.0f), 70144.0f);                   // 8 significant bits: steps of 512 here
  EXPECT_NEAR(lab02::round_to<TypeParam>(1e30f), 1e30, std::ldexp(1e30, -8));  // float16 would give inf
  EXPECT_TRUE(std::isfinite(lab02::round_to<TypeParam>(3e38f)));
  EXPECT_EQ(lab02::add_in<TypeParam>(256.0f, 1.0f), 256.0f);  // 257 needs 9 significant bits
  EXPECT_EQ(lab02::accumulate_updates<TypeParam>(1.0f, 1e-4f, 500), 1.0f);
}

TEST(Lab02Float32, KeepsWhatHalfLoses) {
  EXPECT_EQ(lab02::add_in<float>(2048.0f, 1.0f), 2049.0f);
  EXPECT_EQ(lab02::round_to<float>(70000.0f), 70000.0f);
  // 100 float32 additions of 1e-4 near 1: each rounds by at most 2^-24, so within 100 * 2^-24 of 1.01.
  EXPECT_NEAR(lab02::accumulate_updates<float>(1.0f, 1e-4f, 100), 1.01, 100 * std::ldexp(1.0, -24) + 1e-7);
}

TEST(Lab02Tensor, TensorPathRoundsLikeTheScalarTypes) {
  EXPECT_EQ(lab02::round_in_tensor(2049.0f, at::kHalf), 2048.0f);
  EXPECT_EQ(lab02::add_in_tensor(1000.0f, 0.3f, at::kHalf), 1000.5f);
  EXPECT_EQ(lab02::round_in_tensor(1.0f + std::ldexp(1.0f, -8), at::kBFloat16), 1.0f);
  EXPECT_EQ(lab02::accumulate_in_tensor(1.0f, 1e-4f, 10, at::kHalf), 1.0f);
}

TEST(Lab02Observations, EveryObservationHolds) {
  speedlabs::Report report("02_float16_limits", "cpu");
  lab02::run(lab02::Config{}, report);
  for (const char* id :
       {"fp32_1_plus_1e-8_is_1", "fp16_1000_plus_0.3", "fp16_max_is_65504", "fp16_70000", "bf16_70000",
        "bytes_per_value", "weights_7b_bytes", "fp16_update_1e-4_on_1_is_lost", "fp32_update_1e-4_on_1_is_kept",
        "bf16_update_1e-4_on_1_is_lost", "fp16_weight_stalls_fp32_weight_learns", "fp16_gradient_1e-8",
        "fp16_gradient_scaled_65536_survives", "bf16_gradient_1e-8_is_kept", "format_table"}) {
    ASSERT_TRUE(report.has(id)) << id;
    EXPECT_EQ(report.at(id).verdict, speedlabs::Verdict::holds) << id;
    EXPECT_TRUE(report.at(id).must_hold) << id;
  }
  EXPECT_EQ(report.exit_code(), 0);

  // The measured values are the computed ones, from both libraries.
  const auto& sum = report.at("fp16_1000_plus_0.3").measured;
  EXPECT_EQ(sum["yours"], 1000.5);
  EXPECT_EQ(sum["Eigen"], 1000.5);
  EXPECT_EQ(sum["at::"], 1000.5);
  EXPECT_EQ(sum["tensor Half"], 1000.5);
  EXPECT_EQ(report.at("fp16_70000").measured["at::"], "inf");
  EXPECT_EQ(report.at("fp16_70000").measured["yours"], "inf");
  EXPECT_EQ(report.at("fp16_max_is_65504").measured["yours"], 65504.0);
  EXPECT_EQ(report.at("bf16_70000").measured["Eigen"], 70144.0);
  EXPECT_EQ(report.at("bytes_per_value").measured["libtorch element_size"], nlohmann::json({4, 2, 2}));
  EXPECT_EQ(report.at("weights_7b_bytes").measured["libtorch"]["fp16_gb"], 14.0);
  EXPECT_EQ(report.at("format_table").measured.size(), 4u);
}

TEST(Lab02Observations, EpsilonConstantsAreHeldAgainstArithmetic) {
  speedlabs::Report report("02_float16_limits", "cpu");
  lab02::run(lab02::Config{}, report);
  const auto& o = report.at("epsilon_constants_match_arithmetic");
  EXPECT_FALSE(o.must_hold);  // library constants vary by version; the lab reports, it does not depend on them
  // libtorch's constants are right; whatever Eigen ships, the verdict follows the comparison.
  EXPECT_EQ(o.measured["at::Half"]["numeric_limits"], std::ldexp(1.0, -10));
  EXPECT_EQ(o.measured["at::Half"]["arithmetic"], std::ldexp(1.0, -10));
  EXPECT_EQ(o.measured["Eigen::half"]["arithmetic"], std::ldexp(1.0, -10));
  const bool eigen_right =
      o.measured["Eigen::half"]["numeric_limits"] == o.measured["Eigen::half"]["arithmetic"] &&
      o.measured["Eigen::bfloat16"]["numeric_limits"] == o.measured["Eigen::bfloat16"]["arithmetic"];
  EXPECT_EQ(o.verdict == speedlabs::Verdict::holds, eigen_right);
}

TEST(Lab02Observations, MoreStepsStillStallInHalf) {
  speedlabs::Report report("02_float16_limits", "cpu");
  lab02::Config config;
  config.update_steps = 20000;
  lab02::run(config, report);
  const auto& o = report.at("fp16_weight_stalls_fp32_weight_learns");
  EXPECT_EQ(o.verdict, speedlabs::Verdict::holds);
  EXPECT_EQ(o.measured["fp16"]["Eigen"], 1.0);
  EXPECT_NEAR(o.measured["fp32"]["float"].get<double>(), 3.0, 0.03);  // 1 + 20000 * 1e-4, within the lab's 1%
}

// Every one of the 2^32 float bit patterns through both conversions, against c10::Half and c10::BFloat16
// (any NaN accepted for a NaN). About a minute of CPU at -O2, split over the machine's cores.
TEST(Lab02Exhaustive, EveryFloatBitPatternMatchesLibtorch) {
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<uint64_t> half_wrong{0}, bfloat16_wrong{0};
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      uint64_t half_misses = 0, bfloat16_misses = 0;
      for (uint64_t i = w; i <= 0xffffffffull; i += workers) {
        const auto bits = static_cast<uint32_t>(i);
        float x;
        std::memcpy(&x, &bits, sizeof x);
        const bool nan = std::isnan(x);
        const uint16_t half = lab02::float_to_half_bits(x);
        const uint16_t bfloat16 = lab02::float_to_bfloat16_bits(x);
        if (nan ? !std::isnan(lab02::half_bits_to_float(half)) : half != c10::Half(x).x) ++half_misses;
        if (nan ? (bfloat16 & 0x7fffu) <= 0x7f80u : bfloat16 != c10::BFloat16(x).x) ++bfloat16_misses;
      }
      half_wrong += half_misses;
      bfloat16_wrong += bfloat16_misses;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(half_wrong.load(), 0u) << "float_to_half_bits differs from c10::Half on this many of 2^32 floats";
  EXPECT_EQ(bfloat16_wrong.load(), 0u)
      << "float_to_bfloat16_bits differs from c10::BFloat16 on this many of 2^32 floats";
}

}  // namespace
