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

}  // namespace lab04
