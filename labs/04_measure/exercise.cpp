// Lab 04 exercise: measure(), the timing function every benchmark row of this lab uses.
// Replace the body, then check your work with ./lab check 04.
#include "exercise.h"

#include "common/errors.h"

namespace lab04 {

// Why: a number is only worth something when it is measured right. The first calls are slow (they
// allocate, load kernels, warm caches), so they are made but kept out of the statistics. Device work is
// queued: the call returns before the work is done, so a clock stopped right after fn() times the
// queuing, a hundred times too fast. And one slow call (another process, a page fault) moves a mean
// but not a median.
//
// Hints:
//  - First the counts: repeats < 1 or warmup < 0 is a speedlabs::UsageError (common/errors.h), with a
//    message that says which and what value came.
//  - One timed call: device.synchronize() (so earlier work is not billed to this call), start a
//    std::chrono::steady_clock, fn(), device.synchronize() again (so the work, not its launch, is
//    timed), stop. Milliseconds as a double: std::chrono::duration<double, std::milli>.
//  - Make options.warmup timed calls and remember the time of the very first one; then
//    options.repeats timed calls, whose times, in order, are the samples.
//  - speedlabs::summarize(samples) (common/timer.h) gives median, min and max; set first_ms yourself:
//    the first warm-up call, or the first sample when there is no warm-up.
//  - ./lab check 04 times work that a stand-in device runs on another thread: it finishes only when
//    you call synchronize(), so a missing synchronize shows on any machine, GPU or not.
speedlabs::TimingStats measure(const std::function<void()>& /*fn*/, AsyncDevice& /*device*/,
                               speedlabs::TimingOptions /*options*/) {
  // TODO(lab04): warm-up, then each measured call between two synchronize() calls, then summarize().
  speedlabs::not_implemented("04", "04_measure", "measure");
}

// Why: a comparison timed one side after the other lets anything that changes meanwhile (a program
// starting on the machine, a clock slowing down) land on one side only and pass for a difference between
// the sides. Timing A and B within the same round gives both the same moment of the machine, and the
// ratio taken within each round keeps what the sides differ by and drops what the machine did. Run the
// lab and compare its interleaving_resists_a_changing_load row with what you expected.
//
// Hints:
//  - The same count checks as measure(): repeats < 1 or warmup < 0 is a speedlabs::UsageError.
//  - Time each call exactly as measure() does: synchronize, start the clock, call, synchronize, stop.
//  - Count rounds from 0, warm-up rounds included: an even round calls A then B, an odd round B then A.
//    Warm-up rounds are timed but not kept; remember each side's very first time for its first_ms.
//  - Keep A's and B's measured times in order; speedlabs::summarize() gives each side's statistics.
//  - The ratio: for each measured round r, a[r] / b[r]; speedlabs::summarize_samples() (common/timer.h)
//    gives their median, quartiles and spread.
PairTiming measure_pair(const std::function<void()>& /*fn_a*/, const std::function<void()>& /*fn_b*/,
                        AsyncDevice& /*device*/, speedlabs::TimingOptions /*options*/) {
  // TODO(lab04): warm-up rounds, then measured rounds A B / B A, each call synchronized; then the ratio.
  speedlabs::not_implemented("04", "04_measure", "measure_pair");
}

}  // namespace lab04
