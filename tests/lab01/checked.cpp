// Lab 01, checked outside the student's process (tests/support/checked.h): the three sums of squares of
// vectors whose length, scale and start the grader's seed draws.
#include <Eigen/Core>

#include <cmath>
#include <cstdint>
#include <limits>

#include "exercise.h"
#include "tests/lab01/speed_rules.h"
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

// The speed exercise's values: kTimedValues uniform in [-1, 1), drawn afresh for every timed call from a key the
// seed draws (a splitmix64 stream; a trip count fixed at compile time lets -O2 vectorise it, so drawing them costs
// about a sum, and the grader takes that time off both sides). One buffer for every call, made by the timed
// exercise's prepare(), before the timing starts, so its pages are faulted in outside it.
constexpr int64_t kTimedValues = (int64_t{1} << 24) + 8;
std::vector<double> timed_values;

const double* fresh_values(at::Generator& generator) {
  double* __restrict values = timed_values.data();
  const auto key = static_cast<uint64_t>(draw_int(generator, 0, std::numeric_limits<int64_t>::max() - 1));
  for (int64_t i = 0; i < kTimedValues; ++i) {
    uint64_t z = key + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    values[i] = static_cast<double>(static_cast<int64_t>(z >> 11)) * 0x1.0p-52 - 1.0;
  }
  return values;
}

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

// Speed, timed outside (./lab grade): the unrolled sum against Eigen's squaredNorm on 2^24 - (0..4095) fresh
// values at an unaligned start (128 MiB, far past the caches: both read memory as fast as it goes, as long as
// the loop keeps enough additions in flight), 32 calls a process. Points by the exercise's rule in
// tests/lab01/points.tsv, as the graded test in tests/lab01/graded.cpp in the student's own process.
std::vector<Timed> timed() {
  constexpr auto rule = lab01::speed_rules::sum_squares_unrolled_speed;
  return {{"sum_squares_unrolled_speed", 32, rule.full, rule.zero,
           [](at::Generator& generator, Side side) {
             const int64_t n = (int64_t{1} << 24) - draw_int(generator, 0, 4095), start = draw_int(generator, 0, 7);
             const double* x = fresh_values(generator) + start;
             if (side == Side::inputs_only) return Outputs{};
             const double sum = side == Side::exercise ? lab01::sum_squares_unrolled(x, n)
                                                       : Eigen::Map<const Eigen::VectorXd>(x, n).squaredNorm();
             return Outputs{{"sum", scalar(sum)}};
           },
           kSumTolerance, [] { timed_values.resize(static_cast<size_t>(kTimedValues)); }}};
}

}  // namespace speedlabs::checked
