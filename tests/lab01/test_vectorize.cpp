// Lab 01's observations, from the smoke run's --quick report (tests/support/smoke_run.h), and the per-ISA sums.
// The exercises are graded in graded.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/errors.h"
#include "experiment.h"
#include "tests/support/smoke_run.h"
#include "tests/support/timed.h"

namespace {

using speedlabs::testing::timed_holds_unless_undecided;
using speedlabs::testing::timed_with_evidence;

const char* const kKernelNames[lab01::kIsaKernels] = {"loop", "simd_loop", "eigen"};

/// The builds this CPU runs, narrowest first; the ones it lacks are printed, since their tests cannot run here.
std::vector<lab01::IsaBuild> runnable_builds() {
  std::vector<lab01::IsaBuild> runnable;
  for (const auto& build : lab01::isa_builds()) {
    if (build.supported) {
      runnable.push_back(build);
    } else {
      std::cout << "this CPU cannot run the " << build.name << " build: not tested here\n";
    }
  }
  return runnable;
}

// Where this CPU runs a build wider than SSE2, the per-ISA observations are made: every build's sums agree, and
// each width's speed-up over SSE2 is reported, for each kernel, with its evidence.
void expect_isa_observations(const speedlabs::Report& report) {
  const auto builds = runnable_builds();
  if (builds.size() < 2) {
    EXPECT_EQ(report.at("same_sum_per_isa").verdict, speedlabs::Verdict::not_applicable);
    return;
  }
  EXPECT_EQ(report.at("same_sum_per_isa_agrees").verdict, speedlabs::Verdict::holds);
  const auto& isa = report.at("same_sum_per_isa");
  EXPECT_FALSE(isa.must_hold);
  EXPECT_TRUE(timed_with_evidence(isa));
  EXPECT_GE(isa.evidence["value"]["count"].get<int>(), 10);
  for (const char* kernel : kKernelNames) {
    for (size_t b = 1; b < builds.size(); ++b) {
      const auto& speedup = isa.measured[std::string(kernel) + "_speedup"][builds[b].name];
      ASSERT_TRUE(speedup.is_number()) << kernel << " " << builds[b].name << ": " << isa.measured.dump();
      EXPECT_GT(speedup.get<double>(), 0.0) << kernel << " " << builds[b].name;
    }
  }
}

// The --quick run's observations: the smoke run's (ctest -R lab01.smoke runs `lab01 --quick`, as lab01::run of
// lab01::quick_config()), read back from its report; CTest runs it first (the fixture lab01_json).
TEST(Lab01Observations, FromTheSmokeRunEveryClaimHolds) {
  const speedlabs::Report report = speedlabs::testing::smoke_report("01");
  EXPECT_EQ(report.at("same_result").verdict, speedlabs::Verdict::holds);
  EXPECT_LE(report.at("same_result").measured.get<double>(), 1e-9);
  // The per-element loop dispatches three ops per value: where this run decides, the claim holds; on a busy
  // machine the run may refuse to decide, but it never fails from noise.
  EXPECT_TRUE(timed_holds_unless_undecided(report.at("vectorised_3x_faster")));
  // The lesson's figure rests on the same rounds, with a rule of 10x: reported.
  EXPECT_FALSE(report.at("vectorised_10x_faster").must_hold);
  EXPECT_EQ(report.at("vectorised_10x_faster").evidence, report.at("vectorised_3x_faster").evidence);
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
  expect_isa_observations(report);
}

// Integers are exact in float, and so is every sum of them while each partial sum stays below 2^24 in size:
// every order of addition gives the same float, so each kernel of each build must return exactly the sum. The
// lengths cover the tails of 4-, 8- and 16-lane loops and of Eigen's two packets; the start one float past a
// 64-byte boundary, Eigen's scalar steps up to its first aligned packet; the NaNs after the last value, any
// read past the end.
TEST(Lab01IsaSums, EveryBuildSumsIntegersExactly) {
  constexpr int kCycle = 17;  // values -8..8
  for (const auto& build : runnable_builds()) {
    for (int64_t n : {0, 1, 2, 3, 5, 7, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 95, 127, 129, 4095, 4099}) {
      for (int start : {0, 1}) {
        alignas(64) static float buffer[4099 + 64];
        double exact = 0;
        for (int64_t i = 0; i < n + 32; ++i) {
          buffer[start + i] = i < n ? float(i % kCycle - kCycle / 2) : std::numeric_limits<float>::quiet_NaN();
          if (i < n) exact += buffer[start + i];
        }
        for (int kernel = 0; kernel < lab01::kIsaKernels; ++kernel) {
          EXPECT_EQ(build.sum[kernel](buffer + start, n), exact)
              << build.name << " " << kKernelNames[kernel] << " of " << n << " integers starting at float " << start;
        }
      }
    }
  }
}

// N(0,1) floats, where orders do round differently: any order of n additions errs by at most (n - 1) * u *
// sum|x| (u = 2^-24, float's unit roundoff), so each kernel of each build is held to that bound against the sum
// in double, and any two of them agree within twice it.
TEST(Lab01IsaSums, EveryBuildAgreesWithinTheRoundingOfItsOrder) {
  constexpr int64_t kValues = 100'003;
  std::mt19937 generator(0);
  std::normal_distribution<float> normal;
  std::vector<float> values(kValues);
  double exact = 0, magnitude = 0;
  for (float& v : values) {
    v = normal(generator);
    exact += v;
    magnitude += std::abs(v);
  }
  const double bound = (kValues - 1) * std::ldexp(1.0, -24) * magnitude;
  for (const auto& build : runnable_builds()) {
    for (int kernel = 0; kernel < lab01::kIsaKernels; ++kernel) {
      EXPECT_NEAR(build.sum[kernel](values.data(), kValues), exact, bound) << build.name << " " << kKernelNames[kernel];
    }
  }
}

}  // namespace
