// Lab 01's observations, at a small size, through the same experiment the program runs.
#include <gtest/gtest.h>

#include "experiment.h"
#include "exercise.h"

namespace {

TEST(Lab01Exercise, EigenAndTorchMatchTheScalarLoop) {
  torch::manual_seed(0);
  const auto x = torch::randn({4097}, torch::dtype(torch::kFloat64));
  const double* data = x.data_ptr<double>();
  const double reference = lab01::sum_squares_scalar_loop(data, x.size(0));
  // Different addition orders: within n*eps relative, with n = 4097 that is < 1e-12.
  EXPECT_NEAR(lab01::sum_squares_eigen(Eigen::Map<const Eigen::VectorXd>(data, x.size(0))), reference,
              1e-12 * reference);
  EXPECT_NEAR(lab01::sum_squares_torch(x), reference, 1e-12 * reference);
}

TEST(Lab01Exercise, SmallExactCases) {
  // Integers below 2^53 are exact in double, so these sums are exact in every order.
  const Eigen::VectorXd v = (Eigen::VectorXd(3) << 1.0, -2.0, 3.0).finished();
  EXPECT_EQ(lab01::sum_squares_eigen(v), 14.0);
  EXPECT_EQ(lab01::sum_squares_torch(torch::tensor({1.0, -2.0, 3.0}, torch::kFloat64)), 14.0);
  EXPECT_EQ(lab01::sum_squares_eigen(Eigen::VectorXd(0)), 0.0);
  EXPECT_EQ(lab01::sum_squares_torch(torch::zeros({0}, torch::kFloat64)), 0.0);
}

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
  EXPECT_EQ(report.exit_code(), 0);
}

}  // namespace
