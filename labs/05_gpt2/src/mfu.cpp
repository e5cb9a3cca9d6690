#include "mfu.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "common/format.h"
#include "common/peaks.h"
#include "common/roofline.h"
#include "common/sequential.h"

namespace lab05 {

namespace {

// The matmul that measures each format's peak: large enough to run near the library's best rate, small enough
// for --quick on a CPU, where a float16 matmul without float16 instructions runs at about 1 GFLOP/s (a 512
// cube: 0.2 s; a 1024 cube: 3 s).
constexpr int64_t kPeakMatmulCpu = 512, kPeakMatmulGpu = 4096;
// A step's useful FLOP/s may stray this far above the measured peak before the peak counts as mismeasured:
// the peak is the best of a few repeats, and 6 N + 12 L C T is an estimate.
constexpr double kPeakTolerance = 0.15;

speedlabs::TimingOptions peak_timing() {
  speedlabs::TimingOptions timing;
  timing.warmup = 2;
  timing.repeats = 5;
  return timing;
}

}  // namespace

void record_mfu(const std::vector<ModeResult>& results, const Config& config,
                const speedlabs::gpt::GPTConfig& model_config, const c10::Device& device, speedlabs::Report& report) {
  if (results.empty()) return;
  const double flops = speedlabs::gpt_model_flops_per_step(model_config, config.batch, config.seq);
  const int64_t n = device.is_cpu() ? kPeakMatmulCpu : kPeakMatmulGpu;
  nlohmann::json modes = nlohmann::json::object();
  std::cout << "\nMFU (" << speedlabs::fixed(flops / 1e9, 2) << " GFLOP per step):\n";
  double first_peak = 0;
  bool under_theory = true;  // a share of the theoretical peak above 1: that peak is not one
  for (const auto& r : results) {
    const auto format = speedlabs::format_of(r.mode);
    const double measured = speedlabs::measure_matmul_rate(device, format, n, peak_timing()).flops;
    const auto theory = speedlabs::theoretical_peak(device, format);
    const double seconds = r.median_ms / 1e3;
    modes[speedlabs::to_string(r.mode)] = {{"format", speedlabs::to_string(format)},
                                           {"step_ms", r.median_ms},
                                           {"mfu_measured_peak", speedlabs::mfu(flops, seconds, measured)},
                                           {"measured_peak_flops", measured},
                                           {"mfu_theoretical_peak", speedlabs::mfu(flops, seconds, theory.flops)},
                                           {"theoretical_peak_flops", theory.flops},
                                           {"theoretical_peak", theory.what}};
    std::cout << "  " << speedlabs::to_string(r.mode) << ": "
              << speedlabs::fixed(100 * speedlabs::mfu(flops, seconds, measured), 1) << "% of the measured "
              << speedlabs::to_string(format) << " matmul peak (" << speedlabs::fixed(measured / 1e9, 1)
              << " GFLOP/s), " << speedlabs::fixed(100 * speedlabs::mfu(flops, seconds, theory.flops), 1)
              << "% of the theoretical peak (" << theory.what << ")\n";
    if (first_peak == 0) first_peak = measured;
    under_theory = under_theory && speedlabs::mfu(flops, seconds, theory.flops) <= 1;
  }
  // The first mode's MFU at every timed step: its step rate scaled to FLOPs over its measured peak.
  const auto& first = results.front();
  speedlabs::Evidence evidence(speedlabs::rate_of(timed_steps(first, config), flops / first_peak), first.contention,
                               speedlabs::LoadEffect::rate);
  evidence.bounds = {{"MFU of " + speedlabs::to_string(first.mode) + " against its measured peak",
                      speedlabs::mfu(flops, first.median_ms / 1e3, first_peak), 0, 1 + kPeakTolerance}};
  report.decide(
      "mfu",
      "model FLOP utilisation of each mode (6 N + 12 L C T FLOPs per token): against the measured matmul "
      "peak of its format, and against the theoretical peak (CPU: cores x clock x FMA units x lanes x 2; "
      "GPU: the datasheet)",
      {{"model_flops_per_step", flops}, {"matmul_size", n}, {"modes", modes}},
      "a share of each peak (reported); no share of the theoretical peak above 1", evidence,
      [under_theory](double mfu) { return mfu > 0 && under_theory; }, false);
}

}  // namespace lab05
