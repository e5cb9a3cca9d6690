/// @file sequential.h
/// @brief Evidence for comparisons whose sides could not be timed interleaved: two runs made one after the
/// other (two precision modes of a training loop, the rungs of a ladder, a one-worker and an N-worker job).
///
/// Interleaving (time_interleaved) is the better measurement: each round's ratio sees one moment of the
/// machine. Where a lab's structure makes the sides whole runs of their own, their per-step samples still
/// carry a spread; the ratio below crosses their quartiles so that its band is wide enough to hold every
/// pairing of the two middles, and a claim decided across that band does not depend on which steps met.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/contention.h"
#include "common/observations.h"
#include "common/timer.h"

namespace speedlabs {

/// @p a over @p b, for two summaries measured one after the other: the median over the median, and a band
/// from a's first quartile over b's third to a's third over b's first (both sides' scatter counted, so the
/// band is never narrower than pairing would give). The count is the smaller of the two.
inline Summary ratio_of_sequential(const Summary& a, const Summary& b) {
  Summary r;
  r.median = a.median / b.median;
  r.q1 = a.q1 / b.q3;
  r.q3 = a.q3 / b.q1;
  r.min = a.min / b.max;
  r.max = a.max / b.min;
  r.count = std::min(a.count, b.count);
  return r;
}

/// The rate @p work / time of per-call times summarised in @p ms (milliseconds): work per second, with the
/// quartiles swapped over (the slowest quarter of calls gives the lowest rates).
inline Summary rate_of(const Summary& ms, double work) {
  const auto per_s = [&](double t) { return work / (t / 1e3); };
  Summary r;
  r.median = per_s(ms.median);
  r.q1 = per_s(ms.q3);
  r.q3 = per_s(ms.q1);
  r.min = per_s(ms.max);
  r.max = per_s(ms.min);
  r.count = ms.count;
  return r;
}

/// Of two windows' readings, the one where other processes used more of the machine: a comparison of two
/// runs is only as quiet as its busier half.
inline Contention busier(const Contention& a, const Contention& b) {
  if (a.busy() != b.busy()) return a.busy() ? a : b;
  return a.others_cores >= b.others_cores ? a : b;
}

/// A rate, a time or a ratio of times: positive and finite, or the measurement failed.
inline Bound positive_finite(const std::string& what, double value) {
  return {what, value, std::numeric_limits<double>::min(), std::numeric_limits<double>::max()};
}

}  // namespace speedlabs
