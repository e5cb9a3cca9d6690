// Lab 01, checked outside the student's process (tests/support/checked.h): the three sums of squares of
// vectors whose length, scale and start the grader's seed draws.
#include <Eigen/Core>

#include <cmath>

#include "exercise.h"
#include "tests/support/checked.h"

namespace speedlabs::checked {

namespace {

// Up to 2^18 + 2^24 positive terms summed in two orders: within n * eps = 1.9e-9 relative of each other
// (1.1e-16 per addition); 1e-8 leaves a margin and still catches one lost element in a million.
constexpr Tolerance kSumTolerance{1e-8, 0};

// float64 N(0, s^2) values with s drawn from 1e-3..1e3 (the sum's scale must not matter).
torch::Tensor draw_values(at::Generator& generator, int64_t n) {
  const double scale = std::pow(10.0, static_cast<double>(draw_int(generator, -3, 3)));
  return torch::randn({n}, generator, torch::kFloat64) * scale;
}

torch::Tensor scalar(double value) { return torch::tensor(value, torch::kFloat64); }

}  // namespace

std::vector<Exercise> exercises() {
  return {
      {"sum_squares_eigen",
       [](at::Generator& generator) {
         const auto x = draw_values(generator, draw_int(generator, 0, 1 << 18));
         return Outputs{{"sum", scalar(lab01::sum_squares_eigen(
                                    Eigen::Map<const Eigen::VectorXd>(x.data_ptr<double>(), x.size(0))))}};
       },
       kSumTolerance},
      {"sum_squares_torch",
       [](at::Generator& generator) {
         const auto x = draw_values(generator, draw_int(generator, 0, 1 << 18));
         return Outputs{{"sum", scalar(lab01::sum_squares_torch(x))}};
       },
       kSumTolerance},
      {"sum_squares_unrolled",
       [](at::Generator& generator) {
         // A start off any alignment and every remainder of the length: the loop's edges.
         Outputs outputs;
         for (const int64_t base : {int64_t{0}, int64_t{1} << 24}) {
           const int64_t n = base + draw_int(generator, 0, 1 << 18), start = draw_int(generator, 0, 7);
           const auto x = draw_values(generator, start + n);
           outputs.emplace_back("sum_of_" + std::string(base ? "2^24_plus" : "up_to_2^18"),
                                scalar(lab01::sum_squares_unrolled(x.data_ptr<double>() + start, n)));
         }
         return outputs;
       },
       kSumTolerance},
  };
}

}  // namespace speedlabs::checked
