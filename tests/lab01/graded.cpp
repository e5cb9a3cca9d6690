// Lab 01 graded tests: your three sums of squares (labs/01_vectorize/exercise.cpp) against the plain
// scalar loop and exact cases. Run them with ./lab check 01.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "exercise.h"
#include "experiment.h"
#include "tests/lab01/speed_rules.h"
#include "tests/support/expect.h"
#include "tests/support/speed.h"

namespace {

using speedlabs::testing::numbers_close;

torch::Tensor random_values(int64_t n) {
  torch::manual_seed(0);
  return torch::randn({n}, torch::dtype(torch::kFloat64));
}

// Different addition orders of n positive terms: within n * eps relative, with n = 4097 that is < 1e-12.
constexpr double kOrderTolerance = 1e-12;

TEST(Lab01_sum_squares_eigen, MatchesTheScalarLoop) {
  const auto x = random_values(4097);
  const double* data = x.data_ptr<double>();
  const double reference = lab01::sum_squares_scalar_loop(data, x.size(0));
  EXPECT_TRUE(numbers_close(lab01::sum_squares_eigen(Eigen::Map<const Eigen::VectorXd>(data, x.size(0))), reference, 0,
                            kOrderTolerance, "sum_squares_eigen of 4097 N(0,1) values vs the scalar loop"));
}

TEST(Lab01_sum_squares_eigen, SmallExactCases) {
  // Integers below 2^53 are exact in double, so these sums are exact in every order.
  const Eigen::VectorXd v = (Eigen::VectorXd(3) << 1.0, -2.0, 3.0).finished();
  EXPECT_EQ(lab01::sum_squares_eigen(v), 14.0) << "sum_squares_eigen([1, -2, 3])";
  EXPECT_EQ(lab01::sum_squares_eigen(Eigen::VectorXd(0)), 0.0) << "sum_squares_eigen of an empty vector";
}

TEST(Lab01_sum_squares_torch, MatchesTheScalarLoop) {
  const auto x = random_values(4097);
  const double reference = lab01::sum_squares_scalar_loop(x.data_ptr<double>(), x.size(0));
  EXPECT_TRUE(numbers_close(lab01::sum_squares_torch(x), reference, 0, kOrderTolerance,
                            "sum_squares_torch of 4097 N(0,1) values vs the scalar loop"));
}

TEST(Lab01_sum_squares_torch, SmallExactCases) {
  EXPECT_EQ(lab01::sum_squares_torch(torch::tensor({1.0, -2.0, 3.0}, torch::kFloat64)), 14.0)
      << "sum_squares_torch([1, -2, 3])";
  EXPECT_EQ(lab01::sum_squares_torch(torch::zeros({0}, torch::kFloat64)), 0.0)
      << "sum_squares_torch of an empty tensor";
}

TEST(Lab01_sum_squares_unrolled, EveryLengthUpTo40IsExact) {
  // 1..n squared are integers far below 2^53, so every order gives the exact sum n(n+1)(2n+1)/6; the
  // lengths cover every remainder modulo any number of partial sums up to 40.
  std::vector<double> values;
  for (int n = 0; n <= 40; ++n) {
    const double expected = n * (n + 1.0) * (2.0 * n + 1.0) / 6.0;
    EXPECT_EQ(lab01::sum_squares_unrolled(values.data(), n), expected) << "sum_squares_unrolled of 1, 2, ..., " << n;
    values.push_back(n + 1.0);
  }
}

TEST(Lab01_sum_squares_unrolled, MatchesTheScalarLoop) {
  for (int64_t n : {4097, 100'003}) {
    const auto x = random_values(n);
    const double* data = x.data_ptr<double>();
    const double reference = lab01::sum_squares_scalar_loop(data, n);
    // n * eps relative: 1e5 * 1.1e-16 = 1.1e-11; 1e-10 leaves a margin and still catches a lost element.
    EXPECT_TRUE(numbers_close(lab01::sum_squares_unrolled(data, n), reference, 0, 1e-10,
                              "sum_squares_unrolled of " + std::to_string(n) + " N(0,1) values vs the scalar loop"));
  }
}

TEST(Lab01_sum_squares_unrolled, ReadsNothingPastTheEnd) {
  // NaN right after the n values: reading data[n] or beyond turns the sum into NaN.
  for (int n = 0; n <= 17; ++n) {
    std::vector<double> values(n + 16, std::numeric_limits<double>::quiet_NaN());
    for (int i = 0; i < n; ++i) values[i] = 2.0;
    EXPECT_EQ(lab01::sum_squares_unrolled(values.data(), n), 4.0 * n)
        << "sum_squares_unrolled of " << n << " twos followed by NaNs: a NaN means it read past data[n - 1]";
  }
}

TEST(Lab01_sum_squares_unrolled, UsesIndependentPartialSums) {
  // 1, then 1023 values whose squares are 2^-54: less than half a step of a double at 1 (2^-53). One
  // running total adds each to 1 and loses it, ending at exactly 1. Independent partial sums add the
  // tiny squares among themselves first, where they survive, and the total ends above 1.
  std::vector<double> values(1024, std::ldexp(1.0, -27));
  values[0] = 1.0;
  const double exact = 1.0 + 1023 * std::ldexp(1.0, -54);
  EXPECT_EQ(lab01::sum_squares_scalar_loop(values.data(), 1024), 1.0);  // the one chain, for contrast
  const double got = lab01::sum_squares_unrolled(values.data(), 1024);
  EXPECT_GT(got, 1.0) << "sum_squares_unrolled(1, then 1023 x 2^-27): expected more than 1 (the exact sum is 1 + "
                      << (exact - 1.0) << "), got exactly " << got
                      << ": every tiny square was added to the running total of 1 and rounded away, which is "
                         "what one chain of additions does; keep several partial sums";
  // The partial sum that holds the 1 still loses the tiny squares added to it: n * eps relative,
  // 1024 * 1.1e-16 = 1.1e-13; 1e-12 leaves a margin.
  EXPECT_TRUE(numbers_close(got, exact, 0, 1e-12, "sum_squares_unrolled(1, then 1023 x 2^-27) vs the exact sum"));
}

}  // namespace

// Speed, graded against this machine's best: your unrolled sum against Eigen's squaredNorm, timed
// interleaved in the same process (tests/support/speed.h), scored by the rule in tests/lab01/points.tsv.
// At 2^24 values (128 MiB, far past the caches) both read memory as fast as it goes, as
// long as the loop keeps enough additions in flight; one chain of additions does not.
TEST(Lab01_sum_squares_unrolled_speed, AtLeastHalfOfEigensSpeed) {
  // Every timed call sums its own window (start and length move with the call's number) and its result is
  // checked against Eigen's on the same window: a wrong or remembered answer earns no speed points.
  const int64_t n = int64_t{1} << 24, slack = 4096;
  const auto x = random_values(n + slack);
  const double* data = x.data_ptr<double>();
  const auto start = [&](int64_t call) { return (call * 7919) % slack; };
  const auto length = [&](int64_t call) { return n - (call * 104729) % slack; };
  speedlabs::testing::grade_speed_checked<double>(
      "sum_squares_unrolled against Eigen's squaredNorm at n = 2^24",
      [&](int64_t call) { return lab01::sum_squares_unrolled(data + start(call), length(call)); },
      [&](int64_t call) { return Eigen::Map<const Eigen::VectorXd>(data + start(call), length(call)).squaredNorm(); },
      [](const double& mine, const double& best) {
        // 2^24 positive terms in two addition orders: far within 1e-9 relative (n * eps is 2e-9 at worst).
        return std::abs(mine - best) <= 1e-9 * best ? std::string()
                                                    : "sum " + std::to_string(mine) + ", Eigen " + std::to_string(best);
      },
      {lab01::speed_rules::sum_squares_unrolled_speed.full, lab01::speed_rules::sum_squares_unrolled_speed.zero});
}
