/// @file tests/support/timed.h
/// @brief Checks of timed observations that hold on any machine, busy or quiet.
///
/// A test never asserts a timing. What it can assert on any machine: the observation went through the
/// measurement layer (it carries its evidence), a verdict the run could not reach says why, and a
/// must-hold claim that this run did decide holds.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "common/observations.h"

namespace speedlabs::testing {

/// Passes when @p o carries the evidence of a timed measurement (spread, sample count, contention) and,
/// if this run could not decide it, says why.
inline ::testing::AssertionResult timed_with_evidence(const speedlabs::Observation& o) {
  if (o.evidence.is_null() || !o.evidence.contains("value") || !o.evidence.contains("contention")) {
    return ::testing::AssertionFailure() << o.id << " carries no evidence: a timed observation must be decided "
                                         << "by Report::decide from its samples and the machine's reading";
  }
  if (o.verdict == speedlabs::Verdict::inconclusive && o.reason.empty()) {
    return ::testing::AssertionFailure() << o.id << " could not be decided but does not say why";
  }
  return ::testing::AssertionSuccess();
}

/// Passes when @p o is timed with evidence and either holds or could not be decided on this run (a busy
/// machine, scattered samples, a broken bound). A `fails` is a failure: the measurement layer refuses to
/// decide from noise, so a decided failure is the claim failing.
inline ::testing::AssertionResult timed_holds_unless_undecided(const speedlabs::Observation& o) {
  const auto with_evidence = timed_with_evidence(o);
  if (!with_evidence) return with_evidence;
  if (o.verdict == speedlabs::Verdict::holds || o.verdict == speedlabs::Verdict::inconclusive) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << o.id << " is " << speedlabs::to_string(o.verdict) << ": measured "
                                       << o.measured.dump() << ", evidence " << o.evidence.dump();
}

}  // namespace speedlabs::testing
