#include <gtest/gtest.h>

#include "common/errors.h"
#include "common/precision.h"

using speedlabs::Precision;

TEST(Precision, NamesRoundTrip) {
  for (Precision p : speedlabs::all_precisions()) EXPECT_EQ(speedlabs::parse_precision(speedlabs::to_string(p)), p);
  EXPECT_THROW(speedlabs::parse_precision("fp8"), speedlabs::UsageError);
}

// What each mode switches on is lab 05's exercise; tests/lab05/graded.cpp checks it through the training step.

TEST(Precision, Tf32ScopeSetsAndRestoresMatmulPrecision) {
  ASSERT_EQ(speedlabs::current_matmul_precision(), "highest");
  {
    speedlabs::MatmulPrecisionScope scope(std::string("high"));  // what tf32 sets
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
