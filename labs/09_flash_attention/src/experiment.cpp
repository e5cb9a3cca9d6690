#include "experiment.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include <ATen/SDPBackend.h>

#include "attention_backward.h"
#include "common/errors.h"
#include "common/format.h"
#include "common/memory.h"
#include "common/named_enum.h"
#include "common/plot.h"
#include "common/process.h"
#include "common/progress.h"
#include "common/sequential.h"
#include "common/table.h"
#include "exercise.h"
#include "gpu_comparison.h"
#include "labs/05_gpt2/exercise.h"

namespace lab09 {

using speedlabs::fixed;

std::string to_string(Method method) {
  static const speedlabs::EnumNames<Method> names(
      "attention method", {{Method::written_out, "written_out"}, {Method::tiled, "tiled"}, {Method::sdpa, "sdpa"}});
  return names.name(method);
}

const Measurement& SizeResult::of(Method method) const {
  for (const auto& m : methods) {
    if (m.method == method) return m;
  }
  throw std::out_of_range("lab09: no measurement of " + to_string(method) + " at T=" + std::to_string(seq));
}

int64_t tile_steps(int64_t seq, int64_t q_tile, int64_t kv_tile) {
  int64_t steps = 0;
  for (int64_t q0 = 0; q0 < seq; q0 += q_tile) {
    const int64_t keys = std::min(seq, q0 + q_tile);  // the block's last row sees keys 0..keys-1
    steps += (keys + kv_tile - 1) / kv_tile;
  }
  return steps;
}

std::string sdpa_kernel_name(const torch::Tensor& q) {
  const auto choice = static_cast<at::SDPBackend>(at::_fused_sdp_choice(q, q, q, {}, 0.0, /*is_causal=*/true));
  switch (choice) {
    case at::SDPBackend::math:
      return "math (the written-out attention, composed of ATen ops)";
    case at::SDPBackend::flash_attention:
      return "flash_attention (a tiled kernel with an online softmax)";
    case at::SDPBackend::efficient_attention:
      return "efficient_attention (memory-efficient, tiled)";
    case at::SDPBackend::cudnn_attention:
      return "cudnn_attention";
    case at::SDPBackend::overrideable:
      return "overrideable (a backend's own kernel)";
    case at::SDPBackend::error:
      break;
  }
  return "none fits these inputs";
}

namespace {

using speedlabs::ProgressBar;

torch::Tensor attention(Method method, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const Config& config) {
  switch (method) {
    case Method::written_out:
      return lab05::causal_attention(q, k, v);
    case Method::tiled:
      return tiled_attention_forward(q, k, v, config.q_tile, config.kv_tile).out;
    case Method::sdpa:
      return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
  }
  throw std::logic_error("lab09: unknown method");
}

double max_abs_difference(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

// The extra peak bytes are those of CPU tensor storage, counted by @p meter: scratch space that oneDNN or MKL
// allocate on their own is not in them.
SizeResult measure_size(int64_t seq, const Config& config, speedlabs::TensorMemoryMeter& meter, ProgressBar& bar) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(config.seed + static_cast<uint64_t>(seq));
  const auto q = torch::randn({config.batch, config.heads, seq, config.head_size});
  const auto k = torch::randn_like(q);
  const auto v = torch::randn_like(q);

  SizeResult result;
  result.seq = seq;
  const std::string where = "during the measurements at T=" + std::to_string(seq);
  {
    const auto tiled = attention(Method::tiled, q, k, v, config);
    speedlabs::stop_if_asked(where);
    result.max_error_vs_written_out = max_abs_difference(tiled, attention(Method::written_out, q, k, v, config));
    speedlabs::stop_if_asked(where);
    result.max_error_vs_sdpa = max_abs_difference(tiled, attention(Method::sdpa, q, k, v, config));
  }
  // The three methods are timed interleaved, round after round (common/timer's time_interleaved), so each
  // round's tiled/SDPA ratio compares two calls that saw the same moment of the machine.
  const c10::Device cpu(c10::kCPU);
  const std::vector<Method> methods{Method::written_out, Method::tiled, Method::sdpa};
  std::vector<std::function<void()>> calls;
  for (const Method method : methods) {
    calls.emplace_back([&, method] {
      speedlabs::stop_if_asked(where);
      attention(method, q, k, v, config);
    });
  }
  bar.step("T=" + std::to_string(seq) + " written_out, tiled, sdpa interleaved");
  speedlabs::TimingOptions options;
  options.warmup = config.warmup;
  options.repeats = config.repeats;
  options.max_repeats = kMaxRoundsFactor * config.repeats;
  options.budget_s = kRoundsBudgetS;
  const speedlabs::Interleaved timed = speedlabs::time_interleaved(calls, cpu, options);
  for (size_t i = 0; i < methods.size(); ++i) {
    speedlabs::stop_if_asked(where);
    bar.step("T=" + std::to_string(seq) + " " + to_string(methods[i]) + " peak memory");
    Measurement measurement;
    measurement.method = methods[i];
    measurement.time = timed.sides[i];
    measurement.extra_bytes = meter.extra_peak_bytes(calls[i]);
    result.methods.push_back(measurement);
  }
  result.tiled_over_sdpa = timed.ratio(1, 2);
  result.contention = timed.contention;
  return result;
}

// The tiled gradients against autograd's through lab 05's written-out attention, each side called twice.
BackwardCheck check_backward(const Config& config) {
  torch::manual_seed(config.seed);
  const auto shape = std::vector<int64_t>{config.batch, config.heads, config.backward_seq, config.head_size};
  const auto q = torch::randn(shape, torch::requires_grad());
  const auto k = torch::randn(shape, torch::requires_grad());
  const auto v = torch::randn(shape, torch::requires_grad());
  const auto grad_out = torch::randn(shape);
  const auto reference = [&] {
    return torch::autograd::grad({lab05::causal_attention(q, k, v)}, {q, k, v}, {grad_out});
  };
  const auto tiled = [&] {
    return torch::autograd::grad({tiled_attention(q, k, v, config.q_tile, config.kv_tile)}, {q, k, v}, {grad_out});
  };
  const std::array<torch::autograd::variable_list, 2> references{reference(), reference()};
  const std::array<torch::autograd::variable_list, 2> tileds{tiled(), tiled()};
  constexpr std::array<const char*, 3> kNames{"dq", "dk", "dv"};
  BackwardCheck check;
  for (size_t i = 0; i < kNames.size(); ++i) {
    for (size_t call = 0; call < 2; ++call) {
      const double error = max_abs_difference(tileds[call][i], references[call][i]);
      check.tiled_call_errors[call] = std::max(check.tiled_call_errors[call], error);
      if (error > check.max_abs_error || check.worst_gradient.empty()) {
        check.max_abs_error = error;
        check.worst_gradient = kNames[i];
      }
    }
    check.tiled_repeat_difference =
        std::max(check.tiled_repeat_difference, max_abs_difference(tileds[0][i], tileds[1][i]));
    check.reference_repeat_difference =
        std::max(check.reference_repeat_difference, max_abs_difference(references[0][i], references[1][i]));
  }
  // The tiled side's halves apart, outside autograd: two forwards, then two backwards from the first.
  torch::NoGradGuard no_grad;
  const auto forward = [&] { return tiled_attention_forward(q, k, v, config.q_tile, config.kv_tile); };
  const AttentionOutput first = forward(), second = forward();
  check.forward_repeat_difference =
      std::max(max_abs_difference(first.out, second.out), max_abs_difference(first.lse, second.lse));
  const auto backward = [&] {
    return tiled_attention_backward(q, k, v, first.out, first.lse, grad_out, config.q_tile, config.kv_tile);
  };
  const AttentionGradients once = backward(), again = backward();
  check.backward_repeat_difference =
      std::max({max_abs_difference(once.dq, again.dq), max_abs_difference(once.dk, again.dk),
                max_abs_difference(once.dv, again.dv)});
  return check;
}

std::string megabytes(int64_t bytes) { return fixed(speedlabs::to_mib(static_cast<double>(bytes)), 1); }

void print_table(const Results& results) {
  std::cout << "\n  causal attention, fp32 on the CPU; SDPA ran " << results.sdpa_cpu_kernel << "\n";
  speedlabs::Table table("");
  table.right("T", 7, speedlabs::fixed_digits(0)).gap(2).left("method", 12).gap(2).left("median ms (min-max)", 26);
  table.right("extra peak MiB", 14).gap(3).left("max |tiled - it|", 0);
  for (const auto& size : results.sizes) {
    for (const auto& m : size.methods) {
      std::ostringstream range;
      range << fixed(m.time.median_ms, 2) << " (" << fixed(m.time.min_ms, 2) << "-" << fixed(m.time.max_ms, 2) << ")";
      const std::string error = m.method == Method::written_out ? fixed(size.max_error_vs_written_out * 1e6, 2) + "e-6"
                                : m.method == Method::sdpa      ? fixed(size.max_error_vs_sdpa * 1e6, 2) + "e-6"
                                                                : "";
      table.add_row({double(size.seq), to_string(m.method), range.str(), megabytes(m.extra_bytes), error});
    }
  }
  table.print(std::cout);
  std::cout << "\n";
}

// log(extra(T2) / extra(T1)) / log(T2 / T1) between the two largest T: 1 for linear growth, 2 for quadratic.
std::optional<double> growth_exponent(const Results& results, Method method) {
  if (results.sizes.size() < 2) return std::nullopt;
  const auto& small = results.sizes[results.sizes.size() - 2];
  const auto& large = results.sizes.back();
  const int64_t a = small.of(method).extra_bytes;
  const int64_t b = large.of(method).extra_bytes;
  if (a <= 0 || b <= 0) return std::nullopt;
  return std::log(static_cast<double>(b) / static_cast<double>(a)) /
         std::log(static_cast<double>(large.seq) / static_cast<double>(small.seq));
}

std::string goal_rule() {
  std::string lengths;
  for (const int64_t seq : kGoalSeqLengths) lengths += (lengths.empty() ? "T=" : " and T=") + std::to_string(seq);
  return "reported; the goal is at most " + fixed(kSdpaRatioGoal, 1) + "x at " + lengths + " (quiet machine)";
}

// The tiled forward's time over SDPA's at one T: the ratio per round of the interleaved timing, its median
// and quartiles; what else ran on the machine slowed both calls of a round alike.
void decide_tiled_vs_sdpa(speedlabs::Report& report, const std::string& id, const Results& results,
                          const SizeResult& size) {
  const speedlabs::Summary& ratio = size.tiled_over_sdpa;
  const double tiled_ms = size.of(Method::tiled).time.median_ms, sdpa_ms = size.of(Method::sdpa).time.median_ms;
  speedlabs::Evidence evidence(ratio, size.contention,
                               speedlabs::LoadEffect::ratio);  // both calls of a round on the same cores
  evidence.bounds = {speedlabs::positive_finite("tiled / SDPA time within a round (median)", ratio.median),
                     speedlabs::positive_finite("tiled median ms", tiled_ms),
                     speedlabs::positive_finite("SDPA median ms", sdpa_ms)};
  report.decide(
      id,
      "time of the tiled forward over libtorch's SDPA (" + results.sdpa_cpu_kernel +
          ") at T=" + std::to_string(size.seq),
      {{"T", size.seq},
       {"tiled_ms", tiled_ms},
       {"sdpa_ms", sdpa_ms},
       {"ratio", ratio.median},
       {"ratio_q1", ratio.q1},
       {"ratio_q3", ratio.q3},
       {"rounds", ratio.count}},
      goal_rule(), evidence, [](double r) { return r <= kSdpaRatioGoal; }, /*must_hold=*/false);
}

void observe(const Config& config, const Results& results, speedlabs::Report& report) {
  const auto& largest = results.sizes.back();
  const std::string at_largest = "T=" + std::to_string(largest.seq);

  double worst_written = 0, worst_sdpa = 0;
  nlohmann::json errors = nlohmann::json::object();
  for (const auto& size : results.sizes) {
    worst_written = std::max(worst_written, size.max_error_vs_written_out);
    worst_sdpa = std::max(worst_sdpa, size.max_error_vs_sdpa);
    errors["T=" + std::to_string(size.seq)] = {{"vs_written_out", size.max_error_vs_written_out},
                                               {"vs_sdpa", size.max_error_vs_sdpa}};
  }
  report.check("tiled_matches_reference",
               "the tiled forward gives the written-out attention's output and SDPA's, at every T measured, with "
               "tiles of " +
                   std::to_string(config.q_tile) + " x " + std::to_string(config.kv_tile),
               errors, "max |difference| <= " + fixed(kForwardTolerance * 1e6, 0) + "e-6 (float32 rounding)",
               worst_written <= kForwardTolerance && worst_sdpa <= kForwardTolerance);

  report.check(
      "tiled_backward_matches_autograd",
      "the backward from the log-sum-exp (scores recomputed tile by tile) gives autograd's gradients "
      "through the written-out attention, at T=" +
          std::to_string(config.backward_seq),
      {{"max_abs_error", results.backward.max_abs_error},
       {"worst_gradient", results.backward.worst_gradient},
       {"tiled_repeat_difference", results.backward.tiled_repeat_difference},
       {"reference_repeat_difference", results.backward.reference_repeat_difference},
       {"tiled_call_errors", results.backward.tiled_call_errors},
       {"forward_repeat_difference", results.backward.forward_repeat_difference},
       {"backward_repeat_difference", results.backward.backward_repeat_difference}},
      "max |difference| over dq, dk, dv and two calls of each side <= " + fixed(kBackwardTolerance * 1e6, 0) + "e-6",
      results.backward.max_abs_error <= kBackwardTolerance);

  const std::string memory_claim =
      "the tiled forward's extra peak memory grows like T (exponent near 1 or below), the written-out one's "
      "like T^2 (exponent near 2), between the two largest T";
  const std::string memory_rule = "tiled exponent <= " + fixed(kLinearExponentLimit, 1) +
                                  " and written-out exponent >= " + fixed(kQuadraticExponentFloor, 1);
  const auto tiled_exponent = growth_exponent(results, Method::tiled);
  const auto written_exponent = growth_exponent(results, Method::written_out);
  if (!tiled_exponent || !written_exponent) {
    report.not_applicable("tiled_peak_memory_linear_in_T", memory_claim, memory_rule,
                          "needs two sequence lengths, each with a measured peak above 0");
  } else {
    report.check("tiled_peak_memory_linear_in_T", memory_claim,
                 {{"tiled_exponent", *tiled_exponent}, {"written_out_exponent", *written_exponent}}, memory_rule,
                 *tiled_exponent <= kLinearExponentLimit && *written_exponent >= kQuadraticExponentFloor);
  }

  decide_tiled_vs_sdpa(report, "tiled_vs_sdpa_time", results, largest);
  const std::string at_goal = "T=" + std::to_string(kGoalSeqLengths.front());
  const auto goal = std::find_if(results.sizes.begin(), results.sizes.end(),
                                 [](const SizeResult& size) { return size.seq == kGoalSeqLengths.front(); });
  if (goal == results.sizes.end()) {
    report.not_applicable("tiled_vs_sdpa_time_at_1024", "time of the tiled forward over libtorch's SDPA at " + at_goal,
                          goal_rule(), "this run did not measure " + at_goal, /*must_hold=*/false);
  } else {
    decide_tiled_vs_sdpa(report, "tiled_vs_sdpa_time_at_1024", results, *goal);
  }

  const int64_t written_bytes = largest.of(Method::written_out).extra_bytes;
  const int64_t tiled_bytes = largest.of(Method::tiled).extra_bytes;
  report.check("written_out_vs_tiled_memory_at_4096",
               "extra peak memory of the written-out attention over the tiled one at " + at_largest +
                   (largest.seq == 4096 ? "" : " (the largest T of this run; the full run measures 4096)"),
               {{"T", largest.seq},
                {"written_out_MiB", speedlabs::to_mib(static_cast<double>(written_bytes))},
                {"tiled_MiB", speedlabs::to_mib(static_cast<double>(tiled_bytes))},
                {"ratio", static_cast<double>(written_bytes) / static_cast<double>(std::max<int64_t>(tiled_bytes, 1))}},
               "reported", true, /*must_hold=*/false);
}

// Gnuplot's datablock: one line per T, then each method's median time and extra peak MiB.
std::string plot_data(const Results& results) {
  std::ostringstream data;
  data << "$data << EOD\n";
  for (const auto& size : results.sizes) {
    data << size.seq;
    for (const Method method : {Method::written_out, Method::tiled, Method::sdpa}) {
      const auto& m = size.of(method);
      data << " " << m.time.median_ms << " " << speedlabs::to_mib(static_cast<double>(m.extra_bytes));
    }
    data << "\n";
  }
  data << "EOD\n";
  return data.str();
}

// Tiles so small that one call of the tiled forward would run for minutes, deaf to Ctrl-C, are refused
// before anything runs, with the smallest --kv-tile that the given --q-tile allows.
void check_tiles(const Config& config) {
  int64_t longest = config.backward_seq;
  for (const int64_t seq : config.seq_lengths) longest = std::max(longest, seq);
  const int64_t steps = tile_steps(longest, config.q_tile, config.kv_tile);
  if (steps <= kMaxTileSteps) return;
  int64_t kv_tile = config.kv_tile;
  while (kv_tile < longest && tile_steps(longest, config.q_tile, kv_tile) > kMaxTileSteps) ++kv_tile;
  std::ostringstream message;
  message << "tiles of " << config.q_tile << " x " << config.kv_tile << " make " << steps
          << " tile steps per call of the tiled forward at T=" << longest << ", more than " << kMaxTileSteps
          << " (one call would run for long, and a stop is answered between calls): ";
  if (tile_steps(longest, config.q_tile, kv_tile) <= kMaxTileSteps) {
    message << "use --kv-tile " << kv_tile << " or more with --q-tile " << config.q_tile;
  } else {
    message << "use larger tiles";
  }
  throw speedlabs::UsageError(message.str());
}

}  // namespace

bool write_plot(const Results& results, const std::string& directory) {
  // The script comes on stdin; the output path travels as ARG1 (gnuplot -c), data, never script text.
  const std::string script = plot_data(results) + R"gnuplot(
set terminal svg size 1000,420 dynamic font "sans,12" background "white"
set output ARG1
set multiplot layout 1,2 title "causal attention, fp32 on the CPU, 12 heads of 64: written out vs tiled vs SDPA"
set logscale xy 2
set xlabel "T (tokens)"
set key top left
set grid
set ylabel "median time (ms)"
plot $data using 1:2 with linespoints lw 2 title "written out", \
     $data using 1:4 with linespoints lw 2 title "tiled", \
     $data using 1:6 with linespoints lw 2 title "SDPA"
set ylabel "extra peak memory (MiB)"
plot $data using 1:3 with linespoints lw 2 title "written out", \
     $data using 1:5 with linespoints lw 2 title "tiled", \
     $data using 1:7 with linespoints lw 2 title "SDPA"
unset multiplot
)gnuplot";
  std::string failure;
  const auto written = speedlabs::write_svgs(script, directory, {"lab09_attention_vs_T"}, {}, failure);
  if (written.empty()) {
    std::cerr << "lab09: no plot: " << failure << "\n";
    return false;
  }
  std::cout << "plot written to " << written.front() << "\n";
  return true;
}

Results run(const Config& config, const c10::Device& device, speedlabs::Report& report) {
  if (config.seq_lengths.empty()) throw speedlabs::UsageError("lab09: no sequence length to measure");
  check_tiles(config);
  speedlabs::install_stop_handlers();
  // Before the inputs are made: only storage allocated after the meter's counter is installed is counted.
  speedlabs::TensorMemoryMeter meter(c10::Device(c10::kCPU));
  Results results;
  results.sdpa_cpu_kernel = sdpa_kernel_name(torch::zeros({config.batch, config.heads, 1, config.head_size}));
  std::cout << "causal attention, B=" << config.batch << ", " << config.heads << " heads of " << config.head_size
            << ", fp32 on the CPU; tiles " << config.q_tile << " x " << config.kv_tile << "; at least "
            << config.repeats << " timed rounds per T, each calling every method once (interleaved)\n";

  ProgressBar bar(config.progress_bar, static_cast<int>(config.seq_lengths.size()) * 4);
  for (const int64_t seq : config.seq_lengths) results.sizes.push_back(measure_size(seq, config, meter, bar));
  bar.clear();
  speedlabs::stop_if_asked("during the measurements");
  results.backward = check_backward(config);
  print_table(results);
  observe(config, results, report);
  if (!config.plots_dir.empty()) write_plot(results, config.plots_dir);
  compare_on_gpu(config, device, report);
  return results;
}

}  // namespace lab09
