// Lab 01's observations, at a small size, through the same experiment the program runs.
// The exercises are graded in graded.cpp.
#include <gtest/gtest.h>

#include "common/errors.h"
#include "experiment.h"
#include "tests/support/timed.h"

namespace {

using speedlabs::testing::timed_holds_unless_undecided;
using speedlabs::testing::timed_with_evidence;

TEST(Lab01Observations, QuickRunHoldsItsClaims) {
  speedlabs::Report report("01_vectorize", "cpu");
  lab01::run(lab01::quick_config(), report);
  EXPECT_EQ(report.at("same_result").verdict, speedlabs::Verdict::holds);
  EXPECT_LE(report.at("same_result").measured.get<double>(), 1e-9);
  // The per-element loop dispatches three ops per value: where this run decides, the claim holds; on a busy
  // machine the run may refuse to decide, but it never fails from noise.
  EXPECT_TRUE(timed_holds_unless_undecided(report.at("vectorised_3x_faster")));
  EXPECT_FALSE(report.at("scalar_loop_vs_eigen").must_hold);
  // Speed ratios of the unrolled loop and libtorch depend on the machine: reported, with their evidence.
  for (const char* id : {"scalar_loop_vs_eigen", "torch_vs_eigen", "unrolled_vs_scalar_loop", "unrolled_vs_eigen"}) {
    EXPECT_GT(report.at(id).measured.get<double>(), 0.0) << id;
    EXPECT_FALSE(report.at(id).must_hold) << id;
    EXPECT_TRUE(timed_with_evidence(report.at(id)));
  }
  // Each ratio came from rounds in which every variant ran once: the slow loop's rounds, then the fast ones'.
  EXPECT_GE(report.at("vectorised_3x_faster").evidence["value"]["count"].get<int>(), 3);
  EXPECT_GE(report.at("unrolled_vs_eigen").evidence["value"]["count"].get<int>(), 10);
  EXPECT_NE(report.exit_code(), speedlabs::kExitObservationFailed);
}

}  // namespace
