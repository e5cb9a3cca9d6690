// Lab 04 reference solution.
#include "exercise.h"

#include <chrono>
#include <string>
#include <vector>

#include "common/errors.h"

namespace lab04 {

namespace {

void check_counts(const speedlabs::TimingOptions& options) {
  if (options.repeats < 1) {
    throw speedlabs::UsageError("repeats must be at least 1, got " + std::to_string(options.repeats));
  }
  if (options.warmup < 0) {
    throw speedlabs::UsageError("warmup must be 0 or more, got " + std::to_string(options.warmup));
  }
}

// One call of fn on a host clock, the device synchronized before the clock starts (earlier work is not
// billed to this call) and before it stops (the work itself is timed, not just its launch).
double synchronized_ms(const std::function<void()>& fn, AsyncDevice& device) {
  device.synchronize();
  const auto start = std::chrono::steady_clock::now();
  fn();
  device.synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

speedlabs::TimingStats measure(const std::function<void()>& fn, AsyncDevice& device, speedlabs::TimingOptions options) {
  check_counts(options);
  const auto timed_call = [&] { return synchronized_ms(fn, device); };

  double first_ms = -1;
  for (int i = 0; i < options.warmup; ++i) {
    const double ms = timed_call();
    if (i == 0) first_ms = ms;
  }
  std::vector<double> samples;
  samples.reserve(options.repeats);
  for (int i = 0; i < options.repeats; ++i) samples.push_back(timed_call());
  speedlabs::TimingStats stats = speedlabs::summarize(std::move(samples));
  stats.first_ms = first_ms >= 0 ? first_ms : stats.samples_ms.front();
  return stats;
}

PairTiming measure_pair(const std::function<void()>& fn_a, const std::function<void()>& fn_b, AsyncDevice& device,
                        speedlabs::TimingOptions options) {
  check_counts(options);
  double first_a = -1, first_b = -1;
  std::vector<double> a, b;
  for (int round = 0; round < options.warmup + options.repeats; ++round) {
    double ms_a = 0, ms_b = 0;
    if (round % 2 == 0) {  // A B, then B A: neither side always runs right after the other
      ms_a = synchronized_ms(fn_a, device);
      ms_b = synchronized_ms(fn_b, device);
    } else {
      ms_b = synchronized_ms(fn_b, device);
      ms_a = synchronized_ms(fn_a, device);
    }
    if (round == 0) {
      first_a = ms_a;
      first_b = ms_b;
    }
    if (round < options.warmup) continue;
    a.push_back(ms_a);
    b.push_back(ms_b);
  }
  std::vector<double> ratios(a.size());
  for (size_t r = 0; r < a.size(); ++r) ratios[r] = a[r] / b[r];
  PairTiming timing{speedlabs::summarize(std::move(a)), speedlabs::summarize(std::move(b)),
                    speedlabs::summarize_samples(std::move(ratios))};
  timing.a.first_ms = first_a;
  timing.b.first_ms = first_b;
  return timing;
}

}  // namespace lab04
