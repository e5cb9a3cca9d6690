#include "measurement.h"

#include <cmath>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "common/autocast_guard.h"
#include "common/format.h"
#include "common/memory.h"
#include "common/table.h"
#include "exercise.h"

namespace lab04 {

PeakMemory with_peak_memory(const c10::Device& device, const std::function<void()>& fn) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(1);
  if (device.is_cpu()) {
    const bool reset = speedlabs::reset_peak_rss();
    const auto before = speedlabs::current_rss_bytes();
    fn();
    const auto peak = speedlabs::peak_rss_bytes();
    if (!before || !peak) return {{{"unavailable", "no /proc/self/status"}}, "n/a"};
    const double peak_mb = speedlabs::to_mib(*peak);
    const double rise_mb = speedlabs::to_mib(*peak - *before);
    text << "RSS " << peak_mb << " MB (+" << rise_mb << ")" << (reset ? "" : " process peak");
    return {{{"peak_rss_mb", peak_mb}, {"rise_mb", rise_mb}, {"peak_reset", reset}}, text.str()};
  }
  if (!speedlabs::TensorMemoryMeter::can_measure(device)) {
    fn();
    return {{{"unavailable", "no memory statistics for " + device.str() + " in this build"}}, "n/a"};
  }
  speedlabs::TensorMemoryMeter meter(device);
  meter.reset_peak();
  fn();
  const double peak_mb = speedlabs::to_mib(meter.peak());
  text << "allocated " << peak_mb << " MB";
  return {{{"peak_allocated_mb", peak_mb}}, text.str()};
}

Variant run_variant(torch::nn::Sequential& model, const torch::Tensor& x, bool bf16,
                    const speedlabs::TimingOptions& timing) {
  const c10::Device device = x.device();
  Variant v;
  v.device = device.str();
  v.precision = bf16 ? "bf16" : "fp32";
  v.batch = x.size(0);
  torch::NoGradGuard no_grad;
  std::optional<speedlabs::AutocastGuard> autocast;
  if (bf16) autocast.emplace(device.type(), torch::kBFloat16);
  TorchDevice target(device);
  v.memory =
      with_peak_memory(device, [&] { v.timing = measure([&] { v.output = model->forward(x); }, target, timing); });
  return v;
}

nlohmann::json timing_json(const speedlabs::TimingStats& t) {
  return {{"median_ms", t.median_ms}, {"min_ms", t.min_ms}, {"max_ms", t.max_ms}, {"first_ms", t.first_ms}};
}

speedlabs::Evidence timing_evidence(const speedlabs::TimingStats& t, const speedlabs::Contention& contention) {
  speedlabs::Evidence e(t.summary(), contention, speedlabs::LoadEffect::time);
  e.bounds = {{"fastest call (ms)", t.min_ms, 0.0, t.median_ms},
              {"slowest call (ms)", t.max_ms, t.median_ms, INFINITY}};
  return e;
}

speedlabs::Evidence ratio_evidence(const speedlabs::Summary& ratio, const speedlabs::Contention& contention) {
  speedlabs::Evidence e(ratio, contention, speedlabs::LoadEffect::ratio);
  e.bounds = {{"time ratio", ratio.median, 0.0, INFINITY}};
  return e;
}

speedlabs::Summary invert(const speedlabs::Summary& s) {
  speedlabs::Summary r = s;
  r.median = 1 / s.median;
  r.q1 = 1 / s.q3;
  r.q3 = 1 / s.q1;
  r.min = 1 / s.max;
  r.max = 1 / s.min;
  return r;
}

namespace {

speedlabs::Table timing_table() {
  const speedlabs::NumberFormat ms = speedlabs::fixed_digits(3);
  speedlabs::Table table;
  table.left("device", 8).left("variant", 11).right("batch", 7, speedlabs::fixed_digits(0));
  table.right("median ms", 12, ms).right("min ms", 10, ms).right("max ms", 10, ms).right("first ms", 11, ms);
  table.gap(3).left("peak memory", 0);
  return table;
}

}  // namespace

void print_header() { timing_table().print_header(std::cout); }

void print_row(const std::string& device, const std::string& variant, int64_t batch, const speedlabs::TimingStats& t,
               const std::string& memory) {
  timing_table().print_row(std::cout,
                           {device, variant, double(batch), t.median_ms, t.min_ms, t.max_ms, t.first_ms, memory});
}

void print_row(const Variant& v) { print_row(v.device, v.precision, v.batch, v.timing, v.memory.text); }

}  // namespace lab04
