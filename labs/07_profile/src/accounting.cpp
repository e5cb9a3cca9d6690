#include "accounting.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "common/build_paths.h"
#include "common/device.h"
#include "common/format.h"
#include "common/plot.h"
#include "common/table.h"

namespace lab07 {

using nlohmann::json;
using speedlabs::fixed;

namespace {

// The parts must add up to the step timed without the profiler within this share (the 5%).
constexpr double kSumTolerance = 0.05;
// A rate from a profiled op may stray this far above the measured peak before the accounting counts as
// mismeasured: the peak is the best of a few rounds, not the hardware's true maximum.
constexpr double kPeakTolerance = 0.15;
constexpr double kAttentionForward = 4, kAttentionBackward = 8;  // x B H T S D (see matmul_flops_of)

double numel(const std::vector<int64_t>& shape) {
  double n = 1;
  for (int64_t d : shape) n *= static_cast<double>(d);
  return n;
}

// Bytes per element of the profiler's type names; 0 for what is not a tensor ("Scalar", "ScalarList", "").
double element_bytes(const std::string& dtype) {
  static const std::map<std::string, double> sizes{
      {"float", 4},         {"double", 8},      {"c10::Half", 2},          {"c10::BFloat16", 2},
      {"long int", 8},      {"int", 4},         {"short int", 2},          {"bool", 1},
      {"unsigned char", 1}, {"signed char", 1}, {"c10::complex<float>", 8}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A fused attention kernel (flash, memory-efficient, cuDNN), not the dispatching scaled_dot_product_attention
// nor the math fallback, whose matmuls are counted as themselves.
bool fused_attention(const std::string& name) {
  return starts_with(name, "aten::_scaled_dot_product_") &&
         (name.find("flash") != std::string::npos || name.find("efficient") != std::string::npos ||
          name.find("cudnn") != std::string::npos);
}

std::string as_percent(double share) { return fixed(100 * share, 1) + "%"; }

// Minor page faults of this process so far, every thread's: a page the kernel had to map in on first touch.
int64_t minor_page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// A step may fault in this many pages (tensor metadata, the loader's batch) and still count as keeping its
// buffers: one 51 MB logits buffer mapped afresh is 12,500.
constexpr int64_t kFewFaults = 1000;

}  // namespace

void observe_page_faults(const ProfiledRounds& rounds, const std::string& allocator, speedlabs::Report& report) {
  std::vector<int64_t> faults = rounds.plain_faults;
  if (faults.empty()) throw std::logic_error("observe_page_faults: no plain step was counted");
  std::sort(faults.begin(), faults.end());
  const int64_t median = faults[faults.size() / 2];
  std::cout << "page faults per plain step: median " << median << " (" << faults.front() << " to " << faults.back()
            << " over " << faults.size() << " steps); " << allocator << "\n";
  report.check("step_page_faults",
               "a training step that keeps its freed buffers in the process takes almost no page faults: the "
               "kernel maps no page of them in again",
               {{"median", median},
                {"min", faults.front()},
                {"max", faults.back()},
                {"steps", faults.size()},
                {"allocator", allocator}},
               "median <= " + std::to_string(kFewFaults) + " per step (reported)", median <= kFewFaults, false);
}

double matmul_flops_of(const std::string& name, const std::vector<std::vector<int64_t>>& shapes) {
  const auto dims = [&](size_t i, size_t rank) { return i < shapes.size() && shapes[i].size() == rank; };
  if (name == "aten::mm" && dims(0, 2) && dims(1, 2)) return 2 * numel(shapes[0]) * shapes[1][1];
  if (name == "aten::addmm" && dims(1, 2) && dims(2, 2)) return 2 * numel(shapes[1]) * shapes[2][1];
  if (name == "aten::bmm" && dims(0, 3) && dims(1, 3)) return 2 * numel(shapes[0]) * shapes[1][2];
  if (name == "aten::baddbmm" && dims(1, 3) && dims(2, 3)) return 2 * numel(shapes[1]) * shapes[2][2];
  if (fused_attention(name)) {
    const bool backward = ends_with(name, "_backward");
    const size_t q = backward ? 1 : 0;  // the backward's first input is the output's gradient
    if (!dims(q, 4) || !dims(q + 1, 4)) return 0;
    return (backward ? kAttentionBackward : kAttentionForward) * numel(shapes[q]) * shapes[q + 1][2];
  }
  return 0;
}

double tensor_bytes(const std::string& name, const std::vector<std::vector<int64_t>>& shapes,
                    const std::vector<std::string>& dtypes) {
  if (name == "aten::embedding" && shapes.size() >= 2 && dtypes.size() >= 2 && shapes[0].size() == 2) {
    const double rows = numel(shapes[1]);  // one looked-up row per index, read and written
    return rows * element_bytes(dtypes[1]) + 2 * rows * static_cast<double>(shapes[0][1]) * element_bytes(dtypes[0]);
  }
  double read = 0, largest = 0;
  for (size_t i = 0; i < shapes.size() && i < dtypes.size(); ++i) {
    const double bytes = numel(shapes[i]) * element_bytes(dtypes[i]);
    read += bytes;
    largest = std::max(largest, bytes);
  }
  return read + largest;
}

bool is_metadata_op(const std::string& name) {
  static const std::set<std::string> views{"aten::view",
                                           "aten::_unsafe_view",
                                           "aten::reshape",
                                           "aten::t",
                                           "aten::transpose",
                                           "aten::permute",
                                           "aten::expand",
                                           "aten::expand_as",
                                           "aten::slice",
                                           "aten::select",
                                           "aten::split",
                                           "aten::split_with_sizes",
                                           "aten::chunk",
                                           "aten::unsqueeze",
                                           "aten::squeeze",
                                           "aten::as_strided",
                                           "aten::detach",
                                           "aten::alias",
                                           "aten::empty",
                                           "aten::empty_like",
                                           "aten::empty_strided",
                                           "aten::new_empty_strided",
                                           "aten::resolve_conj",
                                           "aten::resolve_neg",
                                           "aten::lift_fresh",
                                           "aten::unbind",
                                           "aten::narrow",
                                           "aten::contiguous",
                                           "aten::flatten",
                                           "aten::unflatten",
                                           "aten::view_as",
                                           "aten::numpy_T",
                                           "aten::to"};
  return views.count(name) > 0;
}

StepAccount account_step(const StepProfile& profile, double us_per_op, double profiler_us_per_event) {
  const auto range = [&](const std::string& name) {
    const auto it = profile.range_ms.find(name);
    return it == profile.range_ms.end() ? 0.0 : it->second;
  };
  StepAccount account;
  account.step_ms = profile.step_ms;
  account.data_ms = range("data");
  account.optimizer_ms = range("optimizer");
  double covered = 0;  // time of the top-level ops of forward and backward
  for (const auto& op : profile.top_level) {
    if (op.range != "forward" && op.range != "backward") continue;
    account.ops += 1;
    covered += op.ms;
    const double overhead = op.metadata ? op.ms : std::min(op.ms, us_per_op / 1e3);
    account.overhead_ms += overhead;
    if (op.matmul_flops > 0) {
      account.matmul_ms += op.ms - overhead;
      account.matmul_flops += op.matmul_flops;
    } else {
      account.memory_ms += op.ms - overhead;
      if (!op.metadata) account.memory_bytes += op.bytes;
    }
  }
  account.idle_ms = account.step_ms - account.data_ms - account.optimizer_ms - covered;
  account.events = profile.events;
  account.profiler_ms = static_cast<double>(profile.events) * profiler_us_per_event / 1e3;
  return account;
}

namespace {

struct Part {
  std::string id, label;
  double ms;
};

std::vector<Part> parts_of(const StepAccount& a) {
  return {{"matmul", "matmuls", a.matmul_ms},
          {"memory_bound", "memory-bound ops", a.memory_ms},
          {"host_overhead", "host per-op overhead", a.overhead_ms},
          {"optimizer", "optimizer", a.optimizer_ms},
          {"data", "data loading", a.data_ms},
          {"idle", "idle (in no op)", a.idle_ms}};
}

void print_account(const StepAccount& a, const StepMeasures& m, double matmul_share, double bandwidth_share) {
  std::cout << "a profiled step, " << fixed(a.step_ms, 2)
            << " ms, in parts (the plain steps beside it: " << fixed(m.step.median_ms, 2) << " ms median):\n";
  speedlabs::Table parts;  // no header: the line above names the columns
  parts.left("part", 24).right("ms", 13, speedlabs::fixed_digits(2, " ms")).gap(1).right("share", 7);
  for (const auto& part : parts_of(a))
    parts.print_row(std::cout, {part.label, part.ms, as_percent(part.ms / a.sum_ms())});
  std::cout << "  matmuls: " << fixed(a.matmul_flops / 1e9, 2) << " GFLOP at " << as_percent(matmul_share)
            << " of the measured matmul peak; memory-bound ops: " << fixed(a.memory_bytes / 1e6, 1) << " MB at "
            << as_percent(bandwidth_share) << " of the measured bandwidth; " << a.ops
            << " ops in forward and backward\n";
  std::cout << "  of the profiled step, the profiler's own recording: " << a.events << " events x "
            << fixed(1e3 * a.profiler_ms / std::max<int64_t>(a.events, 1), 2) << " us = " << fixed(a.profiler_ms, 2)
            << " ms; the parts less it: " << fixed(a.unobserved_ms(), 2) << " ms\n";
}

// @p of each timed step, with the machine's reading: one sample per timed step.
speedlabs::Evidence per_step(const StepMeasures& m, const std::function<double(double step_ms)>& of,
                             speedlabs::LoadEffect load) {
  std::vector<double> values;
  for (double ms : m.step.samples_ms) values.push_back(of(ms));
  speedlabs::Evidence evidence(speedlabs::summarize_samples(values), m.step.contention, load);
  return evidence;
}

void observe_mfu(const StepMeasures& m, speedlabs::Report& report) {
  const double seconds = m.step.median_ms / 1e3;
  const double measured = speedlabs::mfu(m.model_flops, seconds, m.peaks.fp32_flops);
  const double theoretical = speedlabs::mfu(m.model_flops, seconds, m.theory.flops);
  std::cout << "model FLOPs " << fixed(m.model_flops / 1e9, 2) << " GFLOP per step in " << fixed(m.step.median_ms, 2)
            << " ms: MFU " << as_percent(measured) << " of the measured fp32 matmul peak ("
            << fixed(m.peaks.fp32_flops / 1e9, 1) << " GFLOP/s), " << as_percent(theoretical)
            << " of the theoretical peak (" << m.theory.what << ")\n";
  auto evidence = per_step(
      m, [&](double ms) { return speedlabs::mfu(m.model_flops, ms / 1e3, m.peaks.fp32_flops); },
      speedlabs::LoadEffect::rate);
  evidence.bounds = {{"MFU against the measured matmul peak", measured, 0, 1 + kPeakTolerance}};
  report.decide(
      "step_mfu",
      "model FLOP utilisation of the step (6 N + 12 L C T FLOPs per token): against the measured "
      "float32 matmul peak, and against the theoretical peak (CPU: cores x clock x FMA units x lanes x 2; GPU: the "
      "datasheet)",
      {{"model_flops_per_step", m.model_flops},
       {"step_ms", m.step.median_ms},
       {"mfu_measured_peak", measured},
       {"measured_peak_flops", m.peaks.fp32_flops},
       {"mfu_theoretical_peak", theoretical},
       {"theoretical_peak_flops", m.theory.flops},
       {"theoretical_peak", m.theory.what},
       {"theoretical_inputs", m.theory.inputs}},
      "a share of each peak (reported); the share of the theoretical peak at most 1", evidence,
      [theoretical](double v) { return v > 0 && theoretical <= 1; }, false);
}

}  // namespace

ProfiledRounds profile_rounds(const std::function<torch::Tensor()>& step, const c10::Device& device, int rounds,
                              int steps_per_round) {
  ProfiledRounds result;
  result.steps_per_round = steps_per_round;
  const auto plain = [&] {
    const int64_t faults_before = minor_page_faults();
    const auto start = std::chrono::steady_clock::now();
    step();
    speedlabs::synchronize(device);
    result.plain_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    result.plain_faults.push_back(minor_page_faults() - faults_before);
  };
  // After each profiled step one plain step runs: the next timed step then follows a step, as every plain step
  // does, not the profiler's teardown (its trace processing leaves other data in the caches).
  const auto profiled = [&] {
    result.profiles.push_back(profile_step(step, device, ""));
    step();
  };
  // One step of each side at a time, so that a drift of the machine over a second or two (a VM's neighbours)
  // reaches both sides of a block alike; a block is steps_per_round of these steps in a row.
  result.timings = speedlabs::time_interleaved({plain, profiled}, device, {0, rounds * steps_per_round});
  return result;
}

namespace {

// The median of each round's block of @p values (rounds of @p block, in order).
std::vector<double> block_medians(const std::vector<double>& values, size_t block) {
  std::vector<double> medians;
  for (size_t from = 0; block > 0 && from + block <= values.size(); from += block) {
    medians.push_back(speedlabs::summarize_samples({values.begin() + from, values.begin() + from + block}).median);
  }
  return medians;
}

}  // namespace

speedlabs::TimingStats ProfiledRounds::plain() const {
  speedlabs::TimingStats stats = speedlabs::summarize(block_medians(plain_ms, steps_per_round));
  stats.first_ms = plain_ms.empty() ? 0 : plain_ms.front();
  stats.contention = timings.contention;
  return stats;
}

StepAccount observe_step_account(const std::vector<StepAccount>& accounts, const StepMeasures& m,
                                 const c10::Device& device, speedlabs::Report& report) {
  // Per round: the median profiled step's parts, less the profiler's own cost, over the median plain step of the
  // block timed beside it (a median: one step in five can stall on a busy moment of the host).
  const size_t rounds = m.step.samples_ms.size();
  std::vector<double> unobserved_ms;
  for (const auto& account : accounts) unobserved_ms.push_back(account.unobserved_ms());
  const std::vector<double> profiled = block_medians(unobserved_ms, rounds > 0 ? accounts.size() / rounds : 0);
  std::vector<double> ratios;
  for (size_t round = 0; round < rounds && round < profiled.size(); ++round) {
    ratios.push_back(profiled[round] / m.step.samples_ms[round]);
  }
  // The step shown is the profiled step whose parts' sum is the median.
  std::vector<size_t> order(accounts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t x, size_t y) { return accounts[x].unobserved_ms() < accounts[y].unobserved_ms(); });
  const StepAccount& a = accounts.at(order.at(order.size() / 2));
  const std::string claim =
      "one training step from the profiler: matmuls (FLOPs from their shapes), memory-bound ops (bytes from "
      "their shapes), the host's per-op overhead, the optimizer, data loading and idle time add up to the "
      "step timed without the profiler beside it";
  // Must hold on a CPU: with every buffer kept in the process (keep_freed_host_memory), a quiet run's rounds agree
  // within a few percent. Before, buffers above glibc's 32 MiB mmap cap were faulted in afresh each step, a
  // profiled step took one more of them than a plain one, and the ratio moved from 0.99 to 1.13 run to run.
  const std::string expected =
      "the parts' sum, less the profiler's own cost, within " + as_percent(kSumTolerance) + " of the step";
  if (!device.is_cpu()) {
    report.not_applicable("step_time_accounted", claim, expected,
                          "on " + device.str() + " the host's timeline of an asynchronous step is not the device's");
  } else {
    const double matmul_rate = a.matmul_ms > 0 ? a.matmul_flops / (a.matmul_ms / 1e3) : 0;
    const double memory_rate = a.memory_ms > 0 ? a.memory_bytes / (a.memory_ms / 1e3) : 0;
    const double matmul_share = matmul_rate / m.peaks.fp32_flops;
    const double bandwidth_share = memory_rate / m.peaks.bandwidth();
    print_account(a, m, matmul_share, bandwidth_share);
    json parts = json::object();
    for (const auto& part : parts_of(a)) parts[part.id + "_ms"] = part.ms;
    for (const auto& part : parts_of(a)) parts[part.id + "_share"] = part.ms / a.sum_ms();
    // Decided on each round's ratio, both sides of it timed in the same round; a load may have slowed either
    // side alone, so a busy machine widens the range by its worst slowdown both ways.
    speedlabs::Evidence evidence(speedlabs::summarize_samples(ratios), m.step.contention, speedlabs::LoadEffect::ratio);
    evidence.bounds = {{"the matmuls' share of the measured matmul peak", matmul_share, 0, 1 + kPeakTolerance}};
    for (const auto& part : parts_of(a)) evidence.bounds.push_back({part.label + " (ms)", part.ms, 0, a.step_ms});
    report.decide(
        "step_time_accounted", claim,
        {{"parts", parts},
         {"sum_ms", a.sum_ms()},
         {"profiler_events", a.events},
         {"profiler_ms", a.profiler_ms},
         {"step_ms", m.step.median_ms},
         {"sum_over_step", speedlabs::summarize_samples(ratios).median},
         {"rounds", ratios.size()},
         {"matmul_gflop", a.matmul_flops / 1e9},
         {"matmul_share_of_peak", matmul_share},
         {"memory_mb", a.memory_bytes / 1e6},
         {"memory_share_of_bandwidth", bandwidth_share},
         {"ops", a.ops}},
        expected, evidence, [](double ratio) { return std::abs(ratio - 1) <= kSumTolerance; }, true);
  }
  observe_mfu(m, report);
  return a;
}

void plot_step_account(const StepAccount& a, const StepMeasures& m, const std::string& plots_dir,
                       const std::string& title) {
  std::ostringstream data, names;
  double bottom = 0;
  for (const auto& part : parts_of(a)) {
    data << '"' << part.label << "\" " << bottom << ' ' << bottom + std::max(0.0, part.ms) << "\n";
    names << '"' << part.label << "\" ";
    bottom += std::max(0.0, part.ms);
  }
  const auto roof_ms = [&](double peak) { return peak > 0 ? m.model_flops / peak * 1e3 : 0.0; };
  std::string failure;
  const std::string svg = speedlabs::plot_svg(
      speedlabs::source_dir() + "/labs/07_profile/src/step_bar.gp", plots_dir, "lab07_step", data.str(),
      {std::to_string(roof_ms(m.peaks.fp32_flops)), std::to_string(roof_ms(m.theory.flops)),
       std::to_string(m.step.median_ms), "One training step, accounted: " + title, names.str()},
      failure);
  std::cout << (svg.empty() ? "no chart: " + failure : "chart written to " + svg) << "\n";
}

}  // namespace lab07
