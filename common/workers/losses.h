/// @file common/workers/losses.h
/// @brief How far one job's losses are from another's, step by step: the worker labs' (10, 11, 14) check that
/// a parallel job trains as the one-worker job does.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "common/errors.h"

namespace speedlabs::workers {

/// The largest |a - b| / |b| over the steps; speedlabs::RuntimeFailure when the two ran different numbers of steps.
/// @param a the job's losses, one a step
/// @param b the losses it is compared with (the reference: one worker)
inline double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) throw speedlabs::RuntimeFailure("the runs have different numbers of steps");
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(b[i]));
  return worst;
}

}  // namespace speedlabs::workers
