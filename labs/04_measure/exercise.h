/// @file labs/04_measure/exercise.h
/// @brief Lab 04 exercise: a timing function that tells the truth.
///
/// Stubs live in labs/04_measure/exercise.cpp, the reference in solutions/04_measure/exercise.cpp.
#pragma once
#include <c10/core/Device.h>

#include <functional>

#include "common/timer.h"

namespace lab04 {

/// Times @p fn on @p device the way the lesson asks: warm-up calls first (made, timed, but left out
/// of the statistics), then @p options.repeats measured calls, each read from a steady host clock
/// with the device synchronized before starting the clock and again before stopping it, and
/// finally the median, min and max of the measured calls.
///
/// Why each part: the first calls pay for loading, allocation and caches; GPU work is queued and
/// returns at once, so a clock read without synchronizing times the queuing, not the work; one
/// slow outlier (another process, a page fault) moves a mean but not a median.
/// Write it with speedlabs::synchronize() (common/device.h) and speedlabs::summarize() (common/timer.h);
/// calling speedlabs::time_ms() would skip the point of the exercise.
/// @param fn       the work to time; called warmup + repeats times
/// @param device   where the work runs (the CPU needs no synchronization, a GPU does)
/// @param options  how many warm-up and measured calls
/// @return         first_ms (the very first call, warm-up or not), samples_ms (the measured calls, in
///                 order), median_ms, min_ms and max_ms of the samples
/// @throws speedlabs::UsageError when options.repeats < 1 or options.warmup < 0
speedlabs::TimingStats measure(const std::function<void()>& fn, const c10::Device& device,
                               speedlabs::TimingOptions options);

}  // namespace lab04
