#include "common/timer.h"

#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <chrono>

#include "common/device.h"
#include "common/errors.h"

namespace speedlabs {

TimingStats summarize(std::vector<double> samples_ms) {
  if (samples_ms.empty()) throw std::invalid_argument("summarize: no samples");
  TimingStats stats;
  stats.samples_ms = samples_ms;
  std::sort(samples_ms.begin(), samples_ms.end());
  const size_t n = samples_ms.size();
  stats.median_ms = n % 2 ? samples_ms[n / 2] : 0.5 * (samples_ms[n / 2 - 1] + samples_ms[n / 2]);
  stats.min_ms = samples_ms.front();
  stats.max_ms = samples_ms.back();
  return stats;
}

namespace {

// The CPU runs an operator's work before the call returns: a host clock around the call measures it.
double host_time_ms(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Device events: the GPU stamps the start and end itself, so host-side launch jitter does not count.
double event_time_ms(const std::function<void()>& fn, const c10::Device& device) {
  const auto* impl = c10::impl::getDeviceGuardImpl(device.type());
  const c10::Stream stream = impl->getStream(device);
  c10::Event start(device.type(), c10::EventFlag::BACKEND_DEFAULT);  // BACKEND_DEFAULT keeps timing on
  c10::Event end(device.type(), c10::EventFlag::BACKEND_DEFAULT);
  synchronize(device);
  start.record(stream);
  fn();
  end.record(stream);
  end.synchronize();
  return start.elapsedTime(end);
}

}  // namespace

double time_once_ms(const std::function<void()>& fn, const c10::Device& device) {
  return device.is_cpu() ? host_time_ms(fn) : event_time_ms(fn, device);
}

TimingStats time_ms(const std::function<void()>& fn, const c10::Device& device, TimingOptions options) {
  if (options.repeats < 1) throw UsageError("repeats must be at least 1, got " + std::to_string(options.repeats));
  if (options.warmup < 0) throw UsageError("warmup must be 0 or more, got " + std::to_string(options.warmup));
  double first_ms = -1;
  for (int i = 0; i < options.warmup; ++i) {
    const double ms = time_once_ms(fn, device);
    if (i == 0) first_ms = ms;
  }
  std::vector<double> samples;
  samples.reserve(options.repeats);
  for (int i = 0; i < options.repeats; ++i) samples.push_back(time_once_ms(fn, device));
  TimingStats stats = summarize(std::move(samples));
  stats.first_ms = first_ms >= 0 ? first_ms : stats.samples_ms.front();
  return stats;
}

}  // namespace speedlabs
