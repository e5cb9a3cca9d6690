/// @file tests/support/speed.h
/// @brief A graded speed test: the exercise timed side by side with the best this machine does, and a share
/// of the exercise's points from how close it comes.
///
/// Both sides are timed interleaved (common/timer.h time_interleaved: A B, B A, ... in rounds; or, with
/// grade_speed_of, in rounds the test makes itself) and the speed fraction is taken within each round
/// (best's time over the exercise's: 1 is as fast as the best).
/// The measurement must be one the layer can decide from (decide_verdict's rules: enough rounds; on a busy
/// machine, a share its load, on either side alone, cannot have changed: all of the points or none); an
/// undecided one is retried, and after the last try the test records "undecided", which grading reports as
/// such (never as 0). Otherwise the share of the points is 1 at or above @c full, 0 at or below @c zero, linear
/// between. The share is recorded as the GoogleTest property "speedlabs_speed_score", which only the harness
/// (tests/support/test_main.cpp) writes to the run's record under its token; the line printed here is for the reader
/// (and for grading the reference from ./lab test's own run, grader/grade.py --ctest-verdicts).
#pragma once
#include <gtest/gtest.h>

#include <c10/core/Device.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>

#include "common/observations.h"
#include "common/timer.h"

namespace speedlabs::testing {

/// Full points at a speed fraction (best's time / exercise's time) of @c full or more, none at @c zero or
/// less, linear between; the thresholds come from the exercise's line in points.tsv (speed_rules.h).
struct SpeedRule {
  double full;       ///< the speed fraction that earns full points (tests/labNN/points.tsv, speed_full)
  double zero;       ///< the speed fraction that earns none (speed_zero)
  int attempts = 3;  ///< measurements tried before the test says it could not decide
  TimingOptions timing{2, 9, 30, 0.05, 3.0};  ///< grade_speed's interleaved rounds
  std::string best = "the best";              ///< the other side, in the printed line ("0.80 of the best's speed")
};

/// The share of the points for a measured speed fraction.
inline double speed_share(double fraction, const SpeedRule& rule) {
  if (!(fraction > rule.zero)) return 0.0;
  return std::clamp((fraction - rule.zero) / (rule.full - rule.zero), 0.0, 1.0);
}

/// How a busy CPU can have moved a fraction timed on @p device: either side alone, on a CPU; nothing the CPU's reading
/// bounds, on a GPU.
inline LoadEffect cpu_load_effect(const c10::Device& device) {
  return device.is_cpu() ? LoadEffect::ratio : LoadEffect::unknown;
}

/// Records the share of the points from the speed fraction that @p measure returns (per-round fractions,
/// best's time over the exercise's, and the machine's reading), measuring again while it cannot decide
/// (see the file's comment). For an exercise whose sides cannot be two calls in this process (lab 10's
/// jobs of MPI workers); grade_speed() below is the usual way in.
inline void grade_speed_of(const std::string& what, const std::function<Evidence()>& measure, const SpeedRule& rule) {
  std::string reason;
  for (int attempt = 1; attempt <= rule.attempts; ++attempt) {
    Evidence evidence = measure();
    evidence.bounds = {{"speed fraction", evidence.value.median, 0.0, INFINITY}};
    // Quiet, any median is a score: the rule only asks whether the measurement can decide at all. Busy, the
    // share must be the same across the range the load widens (evidence.load): all of the points or none.
    const double median_share = speed_share(evidence.value.median, rule);
    const bool busy = evidence.contention.busy();
    const Verdict verdict = decide_verdict(
        evidence, [&](double fraction) { return !busy || speed_share(fraction, rule) == median_share; }, reason);
    if (verdict != Verdict::inconclusive) {
      const double share = median_share;
      std::printf(
          "%s: %.2f of %s's speed (quartiles %.2f-%.2f, %d rounds); full points from %.2f, none "
          "below %.2f\nspeed score: %.3f\n",
          what.c_str(), evidence.value.median, rule.best.c_str(), evidence.value.q1, evidence.value.q3,
          evidence.value.count, rule.full, rule.zero, share);
      ::testing::Test::RecordProperty("speedlabs_speed_score", std::to_string(share));
      return;
    }
    std::printf("%s: attempt %d of %d could not decide (median %.2f of %s's speed, not scored): %s\n", what.c_str(),
                attempt, rule.attempts, evidence.value.median, rule.best.c_str(), reason.c_str());
  }
  std::printf("%s: could not decide: %s\nspeed score: undecided\n", what.c_str(), reason.c_str());
  ::testing::Test::RecordProperty("speedlabs_speed_score", "undecided");
}

/// Times @p exercise against @p best, interleaved in this process (rule.timing), and records the share of
/// the points (see the file's comment).
inline void grade_speed(const std::string& what, const std::function<void()>& exercise,
                        const std::function<void()>& best, const SpeedRule& rule,
                        const c10::Device& device = c10::Device(c10::kCPU)) {
  grade_speed_of(
      what,
      [&] {
        const auto timed = time_interleaved({exercise, best}, device, rule.timing);
        return Evidence(timed.per_round([](const std::vector<double>& ms) { return ms[1] / ms[0]; }), timed.contention,
                        cpu_load_effect(device));
      },
      rule);
}

/// grade_speed() on checked results: call i of each side (numbered from 0 across the measurement's attempts)
/// gets input number i, which the caller makes different for every i (a memoised answer earns nothing), and
/// every output of @p exercise is compared, after its measurement and outside the timed calls, with
/// @p best's output for the same input by @p differs (empty when they agree, else how they differ). One
/// output that differs fails the test: speed points are earned only by the results they check.
template <typename Out>
void grade_speed_checked(const std::string& what, const std::function<Out(int64_t)>& exercise,
                         const std::function<Out(int64_t)>& best,
                         const std::function<std::string(const Out& mine, const Out& best)>& differs,
                         const SpeedRule& rule, const c10::Device& device = c10::Device(c10::kCPU)) {
  int64_t first = 0;
  std::string wrong;
  grade_speed_of(
      what,
      [&] {
        std::vector<Out> outputs;
        int64_t best_calls = 0;
        const auto timed =
            time_interleaved({[&] { outputs.push_back(exercise(first + static_cast<int64_t>(outputs.size()))); },
                              [&] { (void)best(first + best_calls++); }},
                             device, rule.timing);
        for (size_t i = 0; i < outputs.size() && wrong.empty(); ++i) {
          const int64_t input = first + static_cast<int64_t>(i);
          const std::string why = differs(outputs[i], best(input));
          if (!why.empty()) wrong = "timed call " + std::to_string(input) + ": " + why;
        }
        first += std::max(static_cast<int64_t>(outputs.size()), best_calls);
        return Evidence(timed.per_round([](const std::vector<double>& ms) { return ms[1] / ms[0]; }), timed.contention,
                        cpu_load_effect(device));
      },
      rule);
  EXPECT_TRUE(wrong.empty()) << what << ": a timed result is wrong, so its speed earns nothing: " << wrong;
}

}  // namespace speedlabs::testing
