// Lab 04 reference solution.
#include "exercise.h"

#include <chrono>
#include <string>
#include <vector>

#include "common/errors.h"

namespace lab04 {

speedlabs::TimingStats measure(const std::function<void()>& fn, AsyncDevice& device, speedlabs::TimingOptions options) {
  if (options.repeats < 1) {
    throw speedlabs::UsageError("repeats must be at least 1, got " + std::to_string(options.repeats));
  }
  if (options.warmup < 0) {
    throw speedlabs::UsageError("warmup must be 0 or more, got " + std::to_string(options.warmup));
  }
  const auto timed_call = [&] {
    device.synchronize();  // work queued earlier must not be billed to this call
    const auto start = std::chrono::steady_clock::now();
    fn();
    device.synchronize();  // wait for the work itself, not just for its launch
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };

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

}  // namespace lab04
