/// @file common/curves.h
/// @brief Comparing two loss curves, so that a diverged curve can never look close to another.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace speedlabs {

/// The worse of two gaps; NaN when either is NaN (std::max drops a NaN that comes second).
inline double worst_gap(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return std::max(a, b);
}

/// Largest |a[i] - b[i]| over the first `count` points that both curves have (all of them by default).
/// NaN as soon as a compared point is NaN or infinite, so a check `gap <= tolerance` fails on it.
inline double max_abs_gap(const std::vector<double>& a, const std::vector<double>& b,
                          std::size_t count = std::numeric_limits<std::size_t>::max()) {
  const std::size_t n = std::min({count, a.size(), b.size()});
  double gap = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = std::abs(a[i] - b[i]);
    gap = worst_gap(gap, std::isfinite(d) ? d : std::numeric_limits<double>::quiet_NaN());
  }
  return gap;
}

}  // namespace speedlabs
