#include "common/timer.h"

#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "common/device.h"
#include "common/errors.h"
#include "common/process.h"

namespace speedlabs {

namespace {

// The p-quantile of sorted samples, interpolating linearly between neighbours.
double quantile(const std::vector<double>& sorted, double p) {
  const double position = p * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (position - static_cast<double>(below)) * (sorted[above] - sorted[below]);
}

}  // namespace

double Summary::spread() const {
  if (median == 0) return std::numeric_limits<double>::infinity();
  return (q3 - q1) / std::abs(median);
}

nlohmann::json Summary::to_json() const {
  return {{"median", median}, {"q1", q1},       {"q3", q3},          {"min", min},
          {"max", max},       {"count", count}, {"spread", spread()}};
}

Summary summarize_samples(std::vector<double> samples) {
  if (samples.empty()) throw std::invalid_argument("summarize: no samples");
  std::sort(samples.begin(), samples.end());
  Summary s;
  s.count = static_cast<int>(samples.size());
  s.median = quantile(samples, 0.5);
  s.q1 = quantile(samples, 0.25);
  s.q3 = quantile(samples, 0.75);
  s.min = samples.front();
  s.max = samples.back();
  return s;
}

Summary TimingStats::summary() const { return summarize_samples(samples_ms); }

TimingStats summarize(std::vector<double> samples_ms) {
  const Summary s = summarize_samples(samples_ms);
  TimingStats stats;
  stats.samples_ms = std::move(samples_ms);
  stats.median_ms = s.median;
  stats.min_ms = s.min;
  stats.max_ms = s.max;
  stats.q1_ms = s.q1;
  stats.q3_ms = s.q3;
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

void check_options(const TimingOptions& options) {
  if (options.repeats < 1) throw UsageError("repeats must be at least 1, got " + std::to_string(options.repeats));
  if (options.warmup < 0) throw UsageError("warmup must be 0 or more, got " + std::to_string(options.warmup));
}

// True while another round is worth making: below the minimum, or scattered with rounds and time left.
bool wants_more_rounds(const std::vector<std::vector<double>>& samples, const TimingOptions& options, double spent_s) {
  const int done = static_cast<int>(samples.front().size());
  if (done < options.repeats) return true;
  if (done >= options.max_repeats || spent_s >= options.budget_s) return false;
  for (const auto& side : samples) {
    if (summarize_samples(side).spread() > options.target_spread) return true;
  }
  return false;
}

}  // namespace

double time_once_ms(const std::function<void()>& fn, const c10::Device& device) {
  return device.is_cpu() ? host_time_ms(fn) : event_time_ms(fn, device);
}

Summary Interleaved::per_round(const std::function<double(const std::vector<double>& times_ms)>& of_round) const {
  const size_t rounds = sides.at(0).samples_ms.size();
  std::vector<double> values(rounds), times(sides.size());
  for (size_t r = 0; r < rounds; ++r) {
    for (size_t side = 0; side < sides.size(); ++side) times[side] = sides[side].samples_ms[r];
    values[r] = of_round(times);
  }
  return summarize_samples(std::move(values));
}

Summary Interleaved::ratio(size_t i, size_t j) const {
  if (i >= sides.size() || j >= sides.size()) throw std::out_of_range("Interleaved::ratio: no such side");
  return per_round([&](const std::vector<double>& ms) { return ms[i] / ms[j]; });
}

Interleaved time_interleaved(const std::vector<std::function<void()>>& sides, const c10::Device& device,
                             TimingOptions options) {
  if (sides.empty()) throw UsageError("time_interleaved: no sides to time");
  check_options(options);
  const size_t n = sides.size();
  // Even rounds run the sides forwards, odd rounds backwards: a side's cache or clock state left by
  // its neighbour is shared out evenly.
  const auto round = [&](int index, const std::function<void(size_t, double)>& record) {
    for (size_t k = 0; k < n; ++k) {
      // Ctrl-C or SIGTERM (once a lab installed the handlers) is answered between two timed calls.
      stop_if_asked("while timing");
      const size_t side = index % 2 == 0 ? k : n - 1 - k;
      record(side, time_once_ms(sides[side], device));
    }
  };
  std::vector<double> first(n, -1);
  for (int w = 0; w < options.warmup; ++w) {
    round(w, [&](size_t side, double ms) {
      if (first[side] < 0) first[side] = ms;
    });
  }
  std::vector<std::vector<double>> samples(n);
  const ContentionProbe probe;
  const auto started = std::chrono::steady_clock::now();
  const auto spent_s = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  for (int r = options.warmup; wants_more_rounds(samples, options, spent_s()); ++r) {
    round(r, [&](size_t side, double ms) { samples[side].push_back(ms); });
  }
  Interleaved result;
  result.contention = probe.read();
  for (size_t side = 0; side < n; ++side) {
    TimingStats stats = summarize(std::move(samples[side]));
    stats.first_ms = first[side] >= 0 ? first[side] : stats.samples_ms.front();
    stats.contention = result.contention;
    result.sides.push_back(std::move(stats));
  }
  return result;
}

TimingStats time_ms(const std::function<void()>& fn, const c10::Device& device, TimingOptions options) {
  return time_interleaved({fn}, device, options).sides.front();
}

}  // namespace speedlabs
