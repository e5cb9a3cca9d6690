#include "gpu_comparison.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "common/device.h"
#include "common/errors.h"
#include "common/format.h"
#include "common/sequential.h"
#include "common/table.h"
#include "common/timer.h"
#ifdef SPEEDLABS_LAB09_CUDA_KERNEL
#include "flash_attention.h"
#endif

namespace lab09 {
namespace {

using speedlabs::fixed;

const std::string kMatchId = "cuda_kernel_matches_sdpa";
const std::string kMatchClaim = "this lab's CUDA kernel gives SDPA's output on the GPU (float32) at every T measured";
const std::string kTimeId = "cuda_kernel_vs_sdpa_time";
const std::string kTimeClaim =
    "time of this lab's CUDA kernel over SDPA's memory-efficient backend (both float32) at the largest T, "
    "SDPA's flash backend (bfloat16) beside them";

void not_applicable(speedlabs::Report& report, const std::string& reason) {
  report.not_applicable(kMatchId, kMatchClaim, "max |difference| <= 1e-4", reason);
  report.not_applicable(kTimeId, kTimeClaim, "reported", reason, /*must_hold=*/false);
}

#ifdef SPEEDLABS_LAB09_CUDA_KERNEL

// One GPU timing: the median of CUDA-event timings, or why the backend could not run.
struct GpuTime {
  std::optional<double> median_ms;
  std::string why_not;
};

std::string shown(const GpuTime& time) { return time.median_ms ? fixed(*time.median_ms, 3) : "n/a"; }

struct GpuRow {
  int64_t seq = 0;
  double max_error = 0;
  GpuTime kernel, efficient, flash;
  std::optional<speedlabs::Summary> kernel_over_efficient;  ///< per interleaved round
  speedlabs::Summary kernel_times;                          ///< the kernel's side of the rounds
  speedlabs::Contention contention;                         ///< the machine during the rounds
};

// The kernel and SDPA's backends timed interleaved (CUDA events, round after round) so that each round's
// ratio compares calls that saw the same GPU state; a backend that cannot run these inputs (it throws on
// a first call) is left out of the rounds, with the reason. The kernel (side 0) has already run once.
void time_row(const c10::Device& device, const Config& config, GpuRow& row, const std::function<void()>& kernel,
              const std::function<void()>& efficient, const std::function<void()>& flash) {
  std::vector<std::function<void()>> sides{kernel};
  std::vector<GpuTime*> slots{&row.kernel};
  for (const auto& [call, slot] : {std::pair{&efficient, &row.efficient}, std::pair{&flash, &row.flash}}) {
    try {
      (*call)();
      speedlabs::synchronize(device);
      sides.push_back(*call);
      slots.push_back(slot);
    } catch (const c10::Error& e) {
      slot->why_not = e.what_without_backtrace();
    }
  }
  speedlabs::TimingOptions options;
  options.warmup = config.warmup + 2;
  options.repeats = config.repeats;
  options.max_repeats = kMaxRoundsFactor * config.repeats;
  options.budget_s = kRoundsBudgetS;
  const auto timed = speedlabs::time_interleaved(sides, device, options);
  for (size_t i = 0; i < slots.size(); ++i) slots[i]->median_ms = timed.sides[i].median_ms;
  if (slots.size() > 1 && slots[1] == &row.efficient) row.kernel_over_efficient = timed.ratio(0, 1);
  row.kernel_times = timed.sides[0].summary();
  row.contention = timed.contention;
}

#endif

}  // namespace

#ifdef SPEEDLABS_LAB09_CUDA_KERNEL

namespace {

// One T: the kernel's output against SDPA's, then the kernel and SDPA's backends timed. nullopt, with both
// observations recorded as not applicable, where the kernel cannot run (not written yet, a refused size).
std::optional<GpuRow> measure_row(const Config& config, const c10::Device& device, int64_t seq,
                                  speedlabs::Report& report) {
  torch::manual_seed(config.seed + static_cast<uint64_t>(seq));
  const auto options = torch::TensorOptions().device(device).dtype(torch::kFloat);
  const auto q = torch::randn({config.batch, config.heads, seq, config.head_size}, options);
  const auto k = torch::randn_like(q);
  const auto v = torch::randn_like(q);
  auto out = torch::empty_like(q);
  auto lse = torch::empty({config.batch, config.heads, seq}, options);
  const auto kernel = [&] {
    cuda::flash_attention_forward(q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(), out.data_ptr<float>(),
                                  lse.data_ptr<float>(), config.batch, config.heads, seq, config.head_size);
  };
  try {
    kernel();
  } catch (const speedlabs::NotImplementedError& e) {
    not_applicable(report, std::string("the optional GPU exercise is not written yet: ") + e.what());
    return std::nullopt;
  } catch (const std::invalid_argument& e) {
    not_applicable(report, e.what());
    return std::nullopt;
  }
  GpuRow row;
  row.seq = seq;
  row.max_error = (out - at::scaled_dot_product_attention(q, k, v, {}, 0.0, true)).abs().max().item<double>();
  const auto q16 = q.to(torch::kBFloat16), k16 = k.to(torch::kBFloat16), v16 = v.to(torch::kBFloat16);
  time_row(
      device, config, row, kernel,
      [&] { at::_scaled_dot_product_efficient_attention(q, k, v, {}, /*compute_log_sumexp=*/false, 0.0, true); },
      [&] { at::_scaled_dot_product_flash_attention(q16, k16, v16, 0.0, true); });
  return row;
}

// The table of every T, and whether the kernel matched SDPA at each.
void check_rows(const Config& config, const c10::Device& device, const std::vector<GpuRow>& rows,
                speedlabs::Report& report) {
  std::cout << "  on " << speedlabs::describe(device) << ": SDPA with float32 inputs picks "
            << sdpa_kernel_name(torch::zeros({1, 1, 1, config.head_size}, torch::TensorOptions().device(device)))
            << "\n";
  speedlabs::Table table("");
  table.right("T", 7, speedlabs::fixed_digits(0)).right("kernel ms", 12).right("SDPA efficient ms (fp32)", 27);
  table.right("SDPA flash ms (bf16)", 23).right("max |kernel - SDPA|", 22, speedlabs::significant_digits(6));
  table.print_header(std::cout);
  double worst = 0;
  nlohmann::json errors = nlohmann::json::object();
  for (const auto& row : rows) {
    worst = std::max(worst, row.max_error);
    errors["T=" + std::to_string(row.seq)] = row.max_error;
    table.print_row(std::cout,
                    {double(row.seq), shown(row.kernel), shown(row.efficient), shown(row.flash), row.max_error});
  }
  for (const auto* time : {&rows.back().efficient, &rows.back().flash}) {
    if (!time->median_ms) std::cout << "  (a backend could not run: " << time->why_not << ")\n";
  }
  report.check(kMatchId, kMatchClaim, errors, "max |difference| <= " + fixed(kGpuTolerance * 1e4, 0) + "e-4",
               worst <= kGpuTolerance);
}

// The kernel's time at the largest T, decided on its time over SDPA efficient's within each interleaved round
// where that backend ran; else on the kernel's own times (a positive, finite time is all a lone side can show).
void report_time(const GpuRow& last, speedlabs::Report& report) {
  nlohmann::json measured = {{"T", last.seq}, {"kernel_ms", *last.kernel.median_ms}};
  if (last.efficient.median_ms) {
    measured["efficient_fp32_ms"] = *last.efficient.median_ms;
  }
  if (last.flash.median_ms) measured["flash_bf16_ms"] = *last.flash.median_ms;
  // GPU times: the CPU's reading bounds nothing there.
  speedlabs::Evidence evidence(last.kernel_over_efficient ? *last.kernel_over_efficient : last.kernel_times,
                               last.contention, speedlabs::LoadEffect::unknown);
  evidence.bounds = {speedlabs::positive_finite("kernel median ms", *last.kernel.median_ms)};
  if (last.kernel_over_efficient) {
    measured["ratio_vs_efficient"] = last.kernel_over_efficient->median;
    measured["ratio_q1"] = last.kernel_over_efficient->q1;
    measured["ratio_q3"] = last.kernel_over_efficient->q3;
    evidence.bounds.push_back(
        speedlabs::positive_finite("kernel / SDPA efficient time within a round", last.kernel_over_efficient->median));
  }
  measured["rounds"] = evidence.value.count;
  report.decide(
      kTimeId, kTimeClaim, measured, "reported", evidence,
      [](double value) { return std::isfinite(value) && value > 0; }, /*must_hold=*/false);
}

}  // namespace

#endif

void compare_on_gpu(const Config& config, const c10::Device& device, speedlabs::Report& report) {
  if (!device.is_cuda()) {
    not_applicable(report, "no CUDA device in this run (run with --device cuda on a machine with an NVIDIA GPU)");
    return;
  }
#ifndef SPEEDLABS_LAB09_CUDA_KERNEL
  not_applicable(report, "this build found no CUDA compiler, so the kernel (flash_attention.cu) was not compiled");
#else
  std::vector<GpuRow> rows;
  for (const int64_t seq : config.seq_lengths) {
    const auto row = measure_row(config, device, seq, report);
    if (!row) return;
    rows.push_back(*row);
  }
  check_rows(config, device, rows, report);
  report_time(rows.back(), report);
#endif
}

}  // namespace lab09
