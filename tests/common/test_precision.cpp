#include <gtest/gtest.h>

#include "common/errors.h"
#include "common/precision.h"

using speedlabs::Precision;

TEST(Precision, NamesRoundTrip) {
  for (Precision p : speedlabs::all_precisions()) EXPECT_EQ(speedlabs::parse_precision(speedlabs::to_string(p)), p);
  EXPECT_THROW(speedlabs::parse_precision("fp8"), speedlabs::UsageError);
}

TEST(Precision, WhatEachModeSets) {
  EXPECT_FALSE(speedlabs::autocast_dtype(Precision::fp32).has_value());
  EXPECT_FALSE(speedlabs::autocast_dtype(Precision::tf32).has_value());
  EXPECT_EQ(*speedlabs::autocast_dtype(Precision::bf16), c10::kBFloat16);
  EXPECT_EQ(*speedlabs::autocast_dtype(Precision::fp16), c10::kHalf);
  EXPECT_TRUE(speedlabs::needs_grad_scaler(Precision::fp16));
  EXPECT_FALSE(speedlabs::needs_grad_scaler(Precision::bf16));
}

TEST(Precision, Tf32ScopeSetsAndRestoresMatmulPrecision) {
  ASSERT_EQ(speedlabs::current_matmul_precision(), "highest");
  {
    speedlabs::MatmulPrecisionScope scope(Precision::tf32);
    EXPECT_EQ(speedlabs::current_matmul_precision(), "high");
  }
  EXPECT_EQ(speedlabs::current_matmul_precision(), "highest");
}

TEST(Precision, ScopeByTorchNameRestoresToo) {
  ASSERT_EQ(speedlabs::current_matmul_precision(), "highest");
  {
    speedlabs::MatmulPrecisionScope scope(std::string("medium"));
    EXPECT_EQ(speedlabs::current_matmul_precision(), "medium");
  }
  EXPECT_EQ(speedlabs::current_matmul_precision(), "highest");
}
