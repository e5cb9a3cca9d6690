/// @file tests/support/expect.h
/// @brief Comparisons for graded tests that say how wrong an answer is, not just that it is wrong.
///
/// `./lab check NN` shows a student the first failure message of each exercise, so every message says
/// what was expected, what came back and by how much: the largest absolute and relative error and the
/// first element that differs. Use them as `EXPECT_TRUE(tensors_close(...))` or `ASSERT_TRUE(...)`.
#pragma once
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <cstdint>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

namespace speedlabs::testing {

/// "[2, 0, 5]": a flat index as the tensor's multi-dimensional index.
inline std::string index_string(int64_t flat, c10::IntArrayRef sizes) {
  std::vector<int64_t> index(sizes.size());
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    index[d] = sizes[d] == 0 ? 0 : flat % sizes[d];
    flat = sizes[d] == 0 ? 0 : flat / sizes[d];
  }
  std::ostringstream out;
  out << "[";
  for (size_t d = 0; d < index.size(); ++d) out << (d ? ", " : "") << index[d];
  out << "]";
  return out.str();
}

/// Passes when every element satisfies |actual - expected| <= atol + rtol * |expected| (NaN only matches
/// NaN, infinities must be equal). On failure the message names @p what, the shapes or the first element
/// outside the tolerance (index, expected, got), the largest absolute and relative error and the tolerance.
inline ::testing::AssertionResult tensors_close(const torch::Tensor& actual, const torch::Tensor& expected, double atol,
                                                double rtol, const std::string& what) {
  if (!actual.defined()) return ::testing::AssertionFailure() << what << ": got an undefined tensor";
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure() << what << ": expected shape " << expected.sizes() << ", got shape "
                                         << actual.sizes();
  }
  const auto a = actual.detach().to(torch::kCPU, torch::kFloat64).contiguous().flatten();
  const auto e = expected.detach().to(torch::kCPU, torch::kFloat64).contiguous().flatten();
  const double* pa = a.data_ptr<double>();
  const double* pe = e.data_ptr<double>();
  int64_t first_bad = -1, bad_count = 0;
  double max_abs = 0.0, max_rel = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const bool both_nan = std::isnan(pa[i]) && std::isnan(pe[i]);
    const bool same_inf = std::isinf(pe[i]) && pa[i] == pe[i];
    if (both_nan || same_inf) continue;
    const double abs_err = std::abs(pa[i] - pe[i]);  // NaN when either side is NaN or inf
    const double rel_err = abs_err / std::max(std::abs(pe[i]), 1e-30);
    if (!(abs_err <= atol + rtol * std::abs(pe[i]))) {
      ++bad_count;
      if (first_bad < 0) first_bad = i;
    }
    if (std::isnan(abs_err) || abs_err > max_abs) max_abs = abs_err;
    if (std::isnan(rel_err) || rel_err > max_rel) max_rel = rel_err;
  }
  if (first_bad < 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << std::setprecision(9) << what << ": " << bad_count << " of " << a.numel()
                                       << " elements differ; first at " << index_string(first_bad, actual.sizes())
                                       << ": expected " << pe[first_bad] << ", got " << pa[first_bad]
                                       << "; max abs error " << max_abs << ", max rel error " << max_rel
                                       << " (tolerance " << atol << " + " << rtol << " * |expected|)";
}

/// Passes when two numbers agree within atol + rtol * |expected|, with a message in the same words.
inline ::testing::AssertionResult numbers_close(double actual, double expected, double atol, double rtol,
                                                const std::string& what) {
  const double abs_err = std::abs(actual - expected);
  if (abs_err <= atol + rtol * std::abs(expected) || (std::isnan(actual) && std::isnan(expected))) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << std::setprecision(12) << what << ": expected " << expected << ", got "
                                       << actual << " (abs error " << abs_err << ", tolerance " << atol << " + " << rtol
                                       << " * |expected|)";
}

}  // namespace speedlabs::testing
