// Lab 01's observations, at a small size, through the same experiment the program runs.
// The exercises are graded in graded.cpp.
#include <gtest/gtest.h>

#include "experiment.h"

namespace {

TEST(Lab01Observations, QuickRunHoldsItsClaims) {
  speedlabs::Report report("01_vectorize", "cpu");
  lab01::run(lab01::quick_config(), report);
  EXPECT_EQ(report.at("same_result").verdict, speedlabs::Verdict::holds);
  EXPECT_LE(report.at("same_result").measured.get<double>(), 1e-9);
  // The per-element loop dispatches three ops per value; a 3x margin is robust even on a busy machine.
  EXPECT_EQ(report.at("vectorised_3x_faster").verdict, speedlabs::Verdict::holds);
  EXPECT_GT(report.at("scalar_loop_vs_eigen").measured.get<double>(), 0.0);
  EXPECT_GT(report.at("torch_vs_eigen").measured.get<double>(), 0.0);
  EXPECT_FALSE(report.at("scalar_loop_vs_eigen").must_hold);
  // Speed ratios of the unrolled loop depend on the machine and its load: reported, not required.
  for (const char* id : {"unrolled_vs_scalar_loop", "unrolled_vs_eigen"}) {
    EXPECT_GT(report.at(id).measured.get<double>(), 0.0) << id;
    EXPECT_FALSE(report.at(id).must_hold) << id;
  }
  EXPECT_EQ(report.exit_code(), 0);
}

}  // namespace
