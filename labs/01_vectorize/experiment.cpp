#include "experiment.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>

#include "common/device.h"
#include "common/format.h"
#include "exercise.h"

namespace lab01 {

double sum_squares_tensor_loop(const torch::Tensor& x) {
  auto total = torch::zeros({}, x.options());
  for (int64_t i = 0; i < x.size(0); ++i) {
    const auto value = x[i];  // each step dispatches an index, a multiply and an add
    total += value * value;
  }
  return total.item<double>();
}

double sum_squares_scalar_loop(const double* data, int64_t n) {
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += data[i] * data[i];
  return total;
}

Config quick_config() {
  Config config;
  config.n = 100'000;
  config.fast = {2, 10};
  config.element_loop = {0, 1};
  return config;
}

namespace {

void print_row(const std::string& name, double sum, const speedlabs::TimingStats& t) {
  using speedlabs::fixed;
  std::cout << "  " << std::left << std::setw(28) << name << std::right << std::setw(22) << std::setprecision(15)
            << sum << std::setw(12) << fixed(t.median_ms, 3) << std::setw(12) << fixed(t.min_ms, 3) << std::setw(12)
            << fixed(t.max_ms, 3) << "\n";
}

}  // namespace

void run(const Config& config, speedlabs::Report& report) {
  const c10::Device cpu(c10::kCPU);
  torch::manual_seed(config.seed);
  const torch::Tensor x = torch::randn({config.n}, torch::dtype(torch::kFloat64));
  const double* data = x.data_ptr<double>();
  const Eigen::Map<const Eigen::VectorXd> x_eigen(data, config.n);

  double a = 0, b = 0, c = 0, d = 0, e = 0;
  const auto ta = speedlabs::time_ms([&] { a = sum_squares_tensor_loop(x); }, cpu, config.element_loop);
  const auto tb = speedlabs::time_ms([&] { b = sum_squares_scalar_loop(data, config.n); }, cpu, config.fast);
  const auto tc = speedlabs::time_ms([&] { c = sum_squares_eigen(x_eigen); }, cpu, config.fast);
  const auto td = speedlabs::time_ms([&] { d = sum_squares_torch(x); }, cpu, config.fast);
  const auto te = speedlabs::time_ms([&] { e = sum_squares_unrolled(data, config.n); }, cpu, config.fast);

  std::cout << "\nSum of squares of " << config.n << " N(0,1) doubles (seed " << config.seed << "), ms per call:\n"
            << "  " << std::left << std::setw(28) << "variant" << std::right << std::setw(22) << "result"
            << std::setw(12) << "median" << std::setw(12) << "min" << std::setw(12) << "max" << "\n";
  print_row("(a) tensor-indexing loop", a, ta);
  print_row("(b) compiled scalar loop", b, tb);
  print_row("(c) Eigen squaredNorm", c, tc);
  print_row("(d) libtorch (x*x).sum()", d, td);
  print_row("(e) unrolled partial sums", e, te);

  // The five sums add the same terms in different orders (one accumulator, SIMD lanes, pairwise
  // blocks, k partial sums), so they differ by rounding: for n positive terms the error is at most about n*eps
  // relative, 1e6 * 1.1e-16 = 1.1e-10, so 1e-9 leaves a margin and still catches a wrong sum.
  const double reference = b;
  double worst = 0;
  for (double v : {a, c, d, e}) worst = std::max(worst, std::abs(v - reference) / std::abs(reference));
  report.check("same_result", "the five variants compute the same sum (not bit-equal: different addition orders)",
               worst, "max relative difference <= 1e-9", worst <= 1e-9);

  const double slowest_vectorised = std::max(tc.median_ms, td.median_ms);
  const double speedup = ta.median_ms / slowest_vectorised;
  report.check("vectorised_3x_faster",
               "both vectorised versions (Eigen, libtorch) are at least 3x faster than the per-element tensor loop",
               speedup, "(a) median / slower of (c),(d) median >= 3", speedup >= 3.0);

  const double scalar_vs_eigen = tb.median_ms / tc.median_ms;
  report.check("scalar_loop_vs_eigen",
               "Eigen's SIMD expression beats the compiled scalar loop: floating-point addition is not "
               "associative, so without -ffast-math the compiler must keep the loop's one serial chain of adds",
               scalar_vs_eigen, "ratio (b)/(c) > 1, reported", scalar_vs_eigen > 1.0, false);

  const double unrolled_speedup = tb.median_ms / te.median_ms;
  report.check("unrolled_vs_scalar_loop",
               "several independent partial sums beat the one-chain scalar loop: the additions no longer wait "
               "for each other, in plain C++ without -ffast-math",
               unrolled_speedup, "ratio (b)/(e) > 1, reported", unrolled_speedup > 1.0, false);

  const double unrolled_vs_eigen = te.median_ms / tc.median_ms;
  report.check("unrolled_vs_eigen",
               "the hand-unrolled loop comes close to Eigen's SIMD reduction: Eigen's speed comes from the same "
               "idea, independent partial sums",
               unrolled_vs_eigen, "ratio (e)/(c) < 2, reported", unrolled_vs_eigen < 2.0, false);

  const double torch_vs_eigen = td.median_ms / tc.median_ms;
  report.check("torch_vs_eigen",
               "libtorch's (x*x).sum() is within 3x of Eigen: it materialises x*x (an extra pass over memory) "
               "and pays dispatch overhead per call",
               torch_vs_eigen, "ratio (d)/(c) < 3, reported", torch_vs_eigen < 3.0, false);
}

}  // namespace lab01
