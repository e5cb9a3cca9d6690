// AutocastGuard: on, off, nested, restored on exceptions, cache cleared at the outermost exit.
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <stdexcept>

#include "common/autocast_guard.h"

namespace {

using speedlabs::AutocastGuard;

torch::Tensor linear_out(const torch::Tensor& weight) { return torch::linear(torch::ones({2, 4}), weight); }

TEST(AutocastGuard, EnablesAndRestores) {
  ASSERT_FALSE(at::autocast::is_autocast_enabled(c10::kCPU));
  const auto default_dtype = at::autocast::get_autocast_dtype(c10::kCPU);
  const auto weight = torch::ones({3, 4});
  {
    AutocastGuard guard(c10::kCPU, c10::kBFloat16);
    EXPECT_TRUE(at::autocast::is_autocast_enabled(c10::kCPU));
    EXPECT_EQ(at::autocast::get_autocast_dtype(c10::kCPU), c10::kBFloat16);
    EXPECT_EQ(linear_out(weight).scalar_type(), c10::kBFloat16);
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::kCPU));
  EXPECT_EQ(at::autocast::get_autocast_dtype(c10::kCPU), default_dtype);
  EXPECT_EQ(linear_out(weight).scalar_type(), c10::kFloat);
}

TEST(AutocastGuard, NestedGuardsRestoreTheOuterState) {
  const auto weight = torch::ones({3, 4});
  AutocastGuard outer(c10::kCPU, c10::kBFloat16);
  {
    AutocastGuard inner(c10::kCPU, c10::kHalf);
    EXPECT_EQ(linear_out(weight).scalar_type(), c10::kHalf);
    {
      AutocastGuard off(c10::kCPU, c10::kHalf, /*enabled=*/false);
      EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::kCPU));
      EXPECT_EQ(linear_out(weight).scalar_type(), c10::kFloat);
    }
    EXPECT_TRUE(at::autocast::is_autocast_enabled(c10::kCPU));
  }
  EXPECT_EQ(at::autocast::get_autocast_dtype(c10::kCPU), c10::kBFloat16);
  EXPECT_EQ(linear_out(weight).scalar_type(), c10::kBFloat16);
}

TEST(AutocastGuard, RestoresWhenAnExceptionLeavesTheScope) {
  const auto default_dtype = at::autocast::get_autocast_dtype(c10::kCPU);
  EXPECT_THROW(
      {
        AutocastGuard guard(c10::kCPU, c10::kHalf);
        throw std::runtime_error("forward failed");
      },
      std::runtime_error);
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::kCPU));
  EXPECT_EQ(at::autocast::get_autocast_dtype(c10::kCPU), default_dtype);
  // The nesting count went back to 0: a fresh outermost guard increments it to exactly 1.
  {
    AutocastGuard guard(c10::kCPU, c10::kBFloat16);
    EXPECT_EQ(at::autocast::increment_nesting(), 2);
    at::autocast::decrement_nesting();
  }
}

TEST(AutocastGuard, CastCacheLivesInsideAndIsClearedAtTheOutermostExit) {
  // autocast caches the low-precision copy of a float32 leaf that requires grad (a weight).
  auto weight = torch::ones({3, 4}, torch::requires_grad());
  {
    AutocastGuard outer(c10::kCPU, c10::kBFloat16);
    const auto first = linear_out(weight);
    {
      torch::NoGradGuard no_grad;
      weight.fill_(2.0);  // an optimizer step, in place
    }
    { AutocastGuard inner(c10::kCPU, c10::kBFloat16); }  // an inner exit must not clear the cache
    // Still inside the outermost guard: the cached bf16 copy is reused, so the update is not seen (4 = 4*1).
    EXPECT_EQ(linear_out(weight)[0][0].item<float>(), 4.0f);
    EXPECT_EQ(first[0][0].item<float>(), 4.0f);
  }
  AutocastGuard next(c10::kCPU, c10::kBFloat16);
  // The outermost exit cleared the cache, so the next region casts the updated weight (8 = 4*2).
  EXPECT_EQ(linear_out(weight)[0][0].item<float>(), 8.0f);
}

TEST(AutocastSupported, CpuHasBothSixteenBitTypes) {
  // Measured on libtorch 2.13: CPU autocast computes a linear in bfloat16 and in float16.
  EXPECT_TRUE(speedlabs::autocast_supported(c10::Device(c10::kCPU), c10::kBFloat16));
  EXPECT_TRUE(speedlabs::autocast_supported(c10::Device(c10::kCPU), c10::kHalf));
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::kCPU));  // the probe restored the state
}

}  // namespace
