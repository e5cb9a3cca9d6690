/// @file timer.h
/// @brief Timing with discipline: warm-up, repeats, median and quartiles; device events on a GPU; the
/// sides of a comparison timed interleaved, so both see the same machine; how busy the machine was.
///
/// A host clock around GPU work, synchronized before each read, is lab 04's exercise (lab04::measure),
/// so it is not here: what is here times the CPU with a host clock, where a call returns when its work
/// is done, and a GPU with device events, which the GPU stamps itself.
#pragma once
#include <c10/core/Device.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/contention.h"

namespace speedlabs {

/// A robust summary of repeated samples: the median and the quartiles, which one stray sample cannot move.
struct Summary {
  double median = 0;  ///< the middle sample
  double q1 = 0;      ///< the first quartile: a quarter of the samples lie below it
  double q3 = 0;      ///< the third quartile: a quarter of the samples lie above it
  double min = 0;     ///< the smallest sample
  double max = 0;     ///< the largest sample
  int count = 0;      ///< how many samples
  /// The interquartile range over the median: 0.1 means the middle half of the samples lie within a band
  /// 10% of the median wide. Infinite when the median is 0.
  double spread() const;
  /// {"median", "q1", "q3", "min", "max", "count", "spread"}
  nlohmann::json to_json() const;
};

/// The summary of @p samples (which must not be empty); quartiles interpolate between samples.
Summary summarize_samples(std::vector<double> samples);

/// How many calls to make before and while measuring.
struct TimingOptions {
  int warmup = 3;    ///< calls (or rounds of calls) made and discarded before measuring
  int repeats = 10;  ///< measured calls, at least; the statistics come from these
  /// At most this many measured calls: while the spread is above target_spread and the budget lasts,
  /// more are made. 0 (or anything below repeats): exactly `repeats`.
  int max_repeats = 0;
  double target_spread = 0.05;  ///< stop adding calls once the spread is at most this
  double budget_s = 2.0;        ///< ... or once the measured calls took this long
};

/// The statistics of repeated measurements, all in milliseconds.
struct TimingStats {
  double first_ms = 0;             ///< the very first call (cold: allocation, kernel loading, caches)
  std::vector<double> samples_ms;  ///< each measured call, in the order made
  double median_ms = 0;            ///< the median of samples_ms: robust to a stray slow call
  double min_ms = 0;               ///< the fastest measured call
  double max_ms = 0;               ///< the slowest measured call
  double q1_ms = 0;                ///< the first quartile of samples_ms
  double q3_ms = 0;                ///< the third quartile of samples_ms
  Contention contention;           ///< how busy the machine was while these were measured
  /// The interquartile range over the median (see Summary::spread).
  double spread() const { return summary().spread(); }
  /// The samples' summary.
  Summary summary() const;
};

/// Median, quartiles, min and max of @p samples_ms (which must not be empty); first_ms is left as is.
TimingStats summarize(std::vector<double> samples_ms);

/// Times one call of @p fn on @p device. On the CPU it reads a steady host clock; on any other device
/// it records device events around the call and waits for the end event, so queued work is never
/// mistaken for finished work.
double time_once_ms(const std::function<void()>& fn, const c10::Device& device);

/// Several calls timed round after round, each round calling every side once.
struct Interleaved {
  std::vector<TimingStats> sides;  ///< each side's times, in the order the sides were given
  Contention contention;           ///< the machine over the whole measurement
  /// Side @p i's time over side @p j's, taken within each round, summarised over the rounds: both
  /// times of a pair saw the same moment of the machine, so what else ran cancels out of the ratio.
  Summary ratio(size_t i, size_t j) const;
  /// @p of_round applied to each round's times (one per side, in milliseconds), summarised over the rounds.
  Summary per_round(const std::function<double(const std::vector<double>& times_ms)>& of_round) const;
};

/// Warm-up rounds, then measured rounds; in each round every side is called once, the order reversed
/// every other round (A B, B A, ...) so no side always runs right after the other. Rounds are added up to
/// max_repeats while any side's spread is above target_spread and the budget lasts.
/// Throws UsageError for no sides, repeats < 1 or warmup < 0.
Interleaved time_interleaved(const std::vector<std::function<void()>>& sides, const c10::Device& device,
                             TimingOptions options = {});

/// Warm-up then repeats of time_once_ms() (one side of time_interleaved()), with the machine's reading.
/// first_ms is the first call made, whether it is a warm-up call or (with warmup 0) a measured one.
TimingStats time_ms(const std::function<void()>& fn, const c10::Device& device, TimingOptions options = {});

}  // namespace speedlabs
