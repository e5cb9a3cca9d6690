/// @file timer.h
/// @brief Timing with discipline: warm-up, repeats, median/min/max; device events on a GPU.
///
/// A host clock around GPU work, synchronized before each read, is lab 04's exercise (lab04::measure),
/// so it is not here: what is here times the CPU with a host clock, where a call returns when its work
/// is done, and a GPU with device events, which the GPU stamps itself.
#pragma once
#include <c10/core/Device.h>
#include <functional>
#include <vector>

namespace speedlabs {

/// How many calls to make before and while measuring.
struct TimingOptions {
  int warmup = 3;    ///< calls made and discarded before measuring (the first one is still reported)
  int repeats = 10;  ///< measured calls; the statistics come from these
};

/// The statistics of repeated measurements, all in milliseconds.
struct TimingStats {
  double first_ms = 0;              ///< the very first call (cold: allocation, kernel loading, caches)
  std::vector<double> samples_ms;   ///< each measured call
  double median_ms = 0;             ///< the median of samples_ms: robust to a stray slow call
  double min_ms = 0;                ///< the fastest measured call
  double max_ms = 0;                ///< the slowest measured call
};

/// Median, min and max of @p samples_ms (which must not be empty); first_ms is left as is.
TimingStats summarize(std::vector<double> samples_ms);

/// Times one call of @p fn on @p device. On the CPU it reads a steady host clock; on any other device
/// it records device events around the call and waits for the end event, so queued work is never
/// mistaken for finished work.
double time_once_ms(const std::function<void()>& fn, const c10::Device& device);

/// Warm-up then repeats of time_once_ms(). Throws UsageError for repeats < 1 or warmup < 0.
/// first_ms is the first call made, whether it is a warm-up call or (with warmup 0) a measured one.
TimingStats time_ms(const std::function<void()>& fn, const c10::Device& device, TimingOptions options = {});

}  // namespace speedlabs
