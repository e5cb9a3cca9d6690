// Lab 01 reference solution.
#include "exercise.h"

namespace lab01 {

double sum_squares_eigen(const Eigen::Ref<const Eigen::VectorXd>& x) { return x.squaredNorm(); }

double sum_squares_torch(const torch::Tensor& x) { return (x * x).sum().item<double>(); }

double sum_squares_unrolled(const double* data, int64_t n) {
  // Eight chains: two adders with a latency of about four cycles each keep eight additions in flight.
  constexpr int kChains = 8;
  double partial[kChains] = {};
  int64_t i = 0;
  for (; i + kChains <= n; i += kChains) {
    for (int c = 0; c < kChains; ++c) partial[c] += data[i + c] * data[i + c];
  }
  for (; i < n; ++i) partial[i % kChains] += data[i] * data[i];  // the last n % 8 values
  // Combine in a tree: fewer dependent additions, and partial sums of similar size meet.
  for (int width = kChains / 2; width > 0; width /= 2) {
    for (int c = 0; c < width; ++c) partial[c] += partial[c + width];
  }
  return partial[0];
}

}  // namespace lab01
