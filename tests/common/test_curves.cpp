// Loss-curve comparison: a NaN or inf anywhere in the compared points makes the gap NaN, so no check
// of the form `gap <= tolerance` can hold on a diverged run (lab 06 once reported all-NaN curves as close).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/curves.h"

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Curves, GapIsTheLargestDifference) {
  EXPECT_DOUBLE_EQ(speedlabs::max_abs_gap({10.0, 9.0, 8.0}, {10.5, 8.0, 8.25}), 1.0);
}

TEST(Curves, CountLimitsTheComparedPoints) {
  EXPECT_DOUBLE_EQ(speedlabs::max_abs_gap({10.0, 9.0}, {10.5, 0.0}, 1), 0.5);
  EXPECT_DOUBLE_EQ(speedlabs::max_abs_gap({10.0, 9.0, 1.0}, {10.0, 9.0}), 0.0);  // only shared points
}

TEST(Curves, ANonFiniteLossMakesTheGapNaN) {
  EXPECT_TRUE(std::isnan(speedlabs::max_abs_gap({kNaN, kNaN}, {kNaN, kNaN})));
  EXPECT_TRUE(std::isnan(speedlabs::max_abs_gap({10.0, kNaN, 8.0}, {10.0, 9.0, 8.0})));
  EXPECT_TRUE(std::isnan(speedlabs::max_abs_gap({10.0, 9.0}, {10.0, kInf})));
  EXPECT_FALSE(speedlabs::max_abs_gap({kNaN}, {1.0}) <= 0.25);
}

TEST(Curves, WorstGapKeepsNaNWhicheverSideItIsOn) {
  EXPECT_TRUE(std::isnan(speedlabs::worst_gap(0.1, kNaN)));
  EXPECT_TRUE(std::isnan(speedlabs::worst_gap(kNaN, 0.1)));
  EXPECT_DOUBLE_EQ(speedlabs::worst_gap(0.1, 0.2), 0.2);
}

}  // namespace
