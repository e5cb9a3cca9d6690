#include "experiment.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "accounting.h"
#include "common/build_paths.h"
#include "common/device.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/format.h"
#include "common/gpt.h"
#include "common/host_memory.h"
#include "common/memory.h"
#include "common/plot.h"
#include "common/process.h"
#include "common/roofline.h"
#include "common/sequential.h"
#include "common/table.h"
#include "common/timer.h"
#include "datasets/data_files.h"
#include "datasets/data_loader.h"
#include "datasets/gpt2_tokenizer.h"
#include "datasets/token_cache.h"
#include "feeding.h"
#include "op_cost.h"
#include "trace.h"

namespace lab07 {

namespace gpt = speedlabs::gpt;
using nlohmann::json;
using speedlabs::fixed;
using speedlabs::MeasuredPeaks;
using speedlabs::OpPoint;

namespace {

// The goal for the per-op cost: C++ at least this many times cheaper than Python eager.
constexpr double kOpCostGoal = 2.0;
// The ops' self times add up to the step; the profiler's own bookkeeping between events is the rest.
constexpr double kShareSumSlack = 1.01;
constexpr int kShownOps = 5;
// At least this many rounds of a plain and a profiled step for the accounting: with three, one stray round set a
// quartile (3%, 3% and 9% in one quiet run); with seven a quiet run's third quartile still fell 0.3% past the
// 5% rule (1.053); with nine it takes three stray rounds to move a quartile.
constexpr int kAccountRounds = 9;
// Steps in each block of a round: one step against one scattered the rounds' ratios from 0.83 to 1.29 in a
// quiet run (each step by up to 10%), with the median within 2% of 1; with five, quiet runs' third quartiles
// still reached 1.03 to 1.07, across the 5% rule; with ten, three quiet runs' quartiles lay within 0.996-1.018.
constexpr int kAccountStepsPerRound = 10;
// Rounds of the calibration that prices the profiler's own recording of an event.
constexpr int kProfilerCostRounds = 7;

std::string percent(double share) { return fixed(100 * share, 1) + "%"; }

// A new part of the lesson; a stop asked for during the last one is answered here at the latest.
void part(const std::string& title) {
  speedlabs::stop_if_asked("before '" + title + "'");
  std::cout << "\n== " << title << "\n" << std::flush;
}

// --- 1. the trace -------------------------------------------------------------------------------------

struct TraceOutcome {
  StepProfile profile;
  ProfiledRounds rounds;        // plain and profiled steps, interleaved, for the step's accounting
  double step_ms = 0;           // median step time without the profiler
  speedlabs::TimingStats step;  // the timed steps without the profiler
};

TraceOutcome trace_one_step(const Config& config, const gpt::GPTConfig& model_config,
                            const std::vector<int32_t>& tokens, const c10::Device& device) {
  torch::manual_seed(42);
  gpt::GPT model(model_config);
  model->to(device);
  auto optimizer = gpt::make_adamw(model, config.lr);
  datasets::DataLoaderLite loader(tokens, config.batch, config.seq);
  const auto step = [&] {
    torch::Tensor x, y;
    {
      RECORD_USER_SCOPE("data");  // the step's own loading, a part of its time (part 5 prefetches it)
      const auto batch = loader.next_batch();
      x = batch.x.to(device);
      y = batch.y.to(device);
    }
    return ranged_train_step(model, optimizer, x, y);
  };
  TraceOutcome outcome;
  // The warm-up steps and the timed steps run before the profiler starts, so the trace holds one warm step.
  outcome.step = speedlabs::time_ms([&] { step(); }, device, {config.warmup, config.steps});
  outcome.step_ms = outcome.step.median_ms;
  outcome.profile = profile_step(step, device, config.trace_path);
  outcome.rounds = profile_rounds(step, device, std::max(kAccountRounds, config.steps), kAccountStepsPerRound);
  return outcome;
}

void print_profile(const StepProfile& profile, int top) {
  const auto data = profile.range_ms.find("data");
  std::cout << "profiled step: " << fixed(profile.step_ms, 2) << " ms (data "
            << fixed(data == profile.range_ms.end() ? 0.0 : data->second, 2) << ", forward "
            << fixed(profile.range_ms.at("forward"), 2) << ", backward " << fixed(profile.range_ms.at("backward"), 2)
            << ", optimizer " << fixed(profile.range_ms.at("optimizer"), 2) << "); " << profile.op_calls
            << " top-level op calls\n";
  speedlabs::Table table;
  table.left("op (by self time)", 44).right("calls", 7, speedlabs::fixed_digits(0));
  table.right("self ms", 11, speedlabs::fixed_digits(3)).right("share", 8);
  table.print_header(std::cout);
  const auto rows = [&](const std::vector<OpTime>& ops) {
    for (int i = 0; i < std::min<int>(top, static_cast<int>(ops.size())); ++i) {
      const auto& op = ops[i];
      table.print_row(std::cout, {op.name.substr(0, 43), double(op.calls), op.self_ms, percent(op.share)});
    }
  };
  rows(profile.ops);
  if (!profile.kernels.empty()) {
    std::cout << "  GPU kernels (by time):\n";
    rows(profile.kernels);
  }
}

bool trace_names_ranges(const std::string& path, std::string& what) {
  try {
    const auto trace = json::parse(speedlabs::read_file(path));
    std::set<std::string> seen;
    for (const auto& event : trace.at("traceEvents")) {
      if (event.contains("name") && event["name"].is_string()) seen.insert(event["name"].get<std::string>());
    }
    for (const auto& range : step_ranges()) {
      if (!seen.count(range)) {
        what = "no '" + range + "' event";
        return false;
      }
    }
    what = std::to_string(trace.at("traceEvents").size()) + " events";
    return true;
  } catch (const std::exception& e) {
    what = e.what();
    return false;
  }
}

void observe_trace(const Config& config, const TraceOutcome& outcome, const c10::Device& device,
                   speedlabs::Report& report) {
  const auto& profile = outcome.profile;
  json counts = json::object();
  bool once_each = profile.op_calls > 0;
  for (const auto& range : step_ranges()) {
    const int count = profile.range_count.count(range) ? profile.range_count.at(range) : 0;
    counts[range] = count;
    once_each = once_each && count == 1;
  }
  report.check("trace_has_step_ranges",
               "the trace holds one step: the ranges forward, backward and optimizer once each (the warm-up "
               "steps left out), with ops inside",
               {{"ranges", counts}, {"top_level_ops", profile.op_calls}}, "each range exactly once", once_each);

  double self_sum = 0;
  json top = json::array();
  for (const auto& op : profile.ops) self_sum += op.self_ms;
  for (int i = 0; i < std::min<int>(kShownOps, static_cast<int>(profile.ops.size())); ++i) {
    top.push_back({{"op", profile.ops[i].name}, {"self_ms", profile.ops[i].self_ms}, {"share", profile.ops[i].share}});
  }
  const double share_sum = profile.step_ms > 0 ? self_sum / profile.step_ms : 0;
  report.check("top_ops_by_self_time",
               "the ops ranked by self time (time in the op, not in the ops it calls); their self times add up to "
               "at most the step",
               {{"top", top}, {"all_ops_share_of_step", share_sum}}, "shares sum to <= 100%",
               !profile.ops.empty() && share_sum > 0 && share_sum <= kShareSumSlack);

  const std::string trace_claim = "the Chrome/Perfetto trace is written whole and names the step's ranges";
  if (config.trace_path.empty()) {
    report.not_applicable("trace_written", trace_claim, "a JSON trace with traceEvents", "no --trace PATH given",
                          false);
  } else {
    std::string what;
    const bool ok = trace_names_ranges(config.trace_path, what);
    report.check("trace_written", trace_claim, {{"path", config.trace_path}, {"found", what}},
                 "a JSON trace with traceEvents", ok);
  }

  const std::string kernel_claim = "on a GPU the trace also holds the CUDA kernels the step launched";
  if (device.is_cuda()) {
    report.check("gpu_kernels_in_trace", kernel_claim, profile.cuda_kernels, "> 0 kernels", profile.cuda_kernels > 0);
  } else {
    report.not_applicable("gpu_kernels_in_trace", kernel_claim, "> 0 kernels", "runs on " + device.str() + ", no GPU");
  }
}

// --- 2. the cost of one op ----------------------------------------------------------------------------

// A value of one round of the C++ timings from the microseconds per op of the add and of the linear beside it.
using RoundValue = std::function<double(double add_us, double linear_us)>;

// @p of each round of @p cpp's timings (@p calls ops a repeat): a C++ time (a load only lengthens it), or the
// Python time over it (a ratio: a load may slow either alone).
speedlabs::Evidence per_round_evidence(const OpCost& cpp, int calls, const RoundValue& of, speedlabs::LoadEffect load) {
  const auto& adds = cpp.timings.sides[0].samples_ms;
  const auto& linears = cpp.timings.sides[1].samples_ms;
  std::vector<double> values;
  for (size_t i = 0; i < std::min(adds.size(), linears.size()); ++i) {
    values.push_back(of(adds[i] * 1e3 / calls, linears[i] * 1e3 / calls));
  }
  return speedlabs::Evidence(speedlabs::summarize_samples(values), cpp.timings.contention, load);
}

// The host overhead's share of a step: the step's top-level ops x the C++ cost of one.
void observe_host_overhead_share(const TraceOutcome& outcome, const OpCost& cpp, speedlabs::Report& report) {
  const auto& profile = outcome.profile;
  const double overhead_ms = static_cast<double>(profile.op_calls) * cpp.add_us / 1e3;
  const double share = overhead_ms / outcome.step_ms;
  std::cout << "a step: " << profile.op_calls << " top-level ops x " << fixed(cpp.add_us, 2)
            << " us = " << fixed(overhead_ms, 2) << " ms of " << fixed(outcome.step_ms, 2) << " ms (" << percent(share)
            << "): the step is " << (share > 0.5 ? "launch-bound" : "bound by the ops' own work") << "\n";
  std::vector<double> shares;  // against each timed step
  for (double step_ms : outcome.step.samples_ms) shares.push_back(overhead_ms / step_ms);
  // A time over a time, both CPU-bound, measured apart: a load during either may have slowed it alone.
  speedlabs::Evidence evidence(speedlabs::summarize_samples(shares),
                               speedlabs::busier(cpp.timings.contention, outcome.step.contention),
                               speedlabs::LoadEffect::ratio);
  evidence.bounds = {{"host overhead's share of the step", share, 0.0, 1.0}};
  report.decide(
      "step_host_overhead_share",
      "ops per step (counted in the trace) x the C++ cost of a tiny op, as a share of the measured step",
      {{"ops_per_step", profile.op_calls},
       {"us_per_op", cpp.add_us},
       {"overhead_ms", overhead_ms},
       {"step_ms", outcome.step_ms},
       {"share", share}},
      "a share of the step, < 100% (reported)", evidence, [](double s) { return s > 0 && s < 1; }, false);
}

// Returns the C++ cost of a tiny op, in microseconds.
double observe_op_cost(const Config& config, const TraceOutcome& outcome, const c10::Device& device,
                       speedlabs::Report& report) {
  OpCostOptions options{config.op_calls, config.op_repeats, 2};
  const OpCost cpp = measure_op_cost_cpp(device, options);
  std::cout << "C++:    add " << fixed(cpp.add_us, 2) << " us/op, linear " << fixed(cpp.linear_us, 2) << " us/op\n";
  // The Python side comes from a child process, so its ratios carry the C++ side's spread and the reading of the
  // window that includes the child.
  const speedlabs::ContentionProbe probe;
  const auto per_round = [&](const RoundValue& of, speedlabs::LoadEffect load) {
    return per_round_evidence(cpp, options.calls, of, load);
  };
  report.decide(
      "op_overhead_cpp_us", "host time of one tiny op from C++ (1-element add; 8x64 by 64x64 linear)",
      {{"add", cpp.add_us}, {"linear", cpp.linear_us}}, "a few microseconds (reported)",
      per_round([](double add, double) { return add; }, speedlabs::LoadEffect::time), [](double us) { return us > 0; },
      false);

  std::string failure =
      config.python.empty() ? "no Python with torch (--python, or SPEEDLABS_PYTHON at configure time)" : "";
  std::optional<OpCost> python;
  if (!config.python.empty()) python = measure_op_cost_python(config.python, device, options, failure);
  const std::string python_claim = "host time of the same ops from Python eager, in the same run";
  const std::string ratio_claim = "Python eager's cost per op over C++'s (the goal: C++ at least 2x cheaper)";
  if (python) {
    std::cout << "Python: add " << fixed(python->add_us, 2) << " us/op, linear " << fixed(python->linear_us, 2)
              << " us/op\n";
    const auto with_child = [&](speedlabs::Evidence e) {
      if (probe.read().others_cores > e.contention.others_cores) e.contention = probe.read();
      return e;
    };
    report.decide(
        "op_overhead_python_us", python_claim, {{"add", python->add_us}, {"linear", python->linear_us}},
        "more than C++ (reported)",
        with_child(per_round([&](double add, double) { return python->add_us / add; }, speedlabs::LoadEffect::ratio)),
        [](double ratio) { return ratio > 1.0; }, false);
    // The goal holds for both ops: each round's evidence is the smaller of its two ratios.
    const auto smaller_ratio = [&](double add, double linear) {
      return std::min(python->add_us / add, python->linear_us / linear);
    };
    report.decide(
        "op_overhead_python_over_cpp", ratio_claim,
        {{"add", python->add_us / cpp.add_us}, {"linear", python->linear_us / cpp.linear_us}},
        ">= " + fixed(kOpCostGoal, 0) + "x (a goal, reported)",
        with_child(per_round(smaller_ratio, speedlabs::LoadEffect::ratio)),
        [](double ratio) { return ratio >= kOpCostGoal; }, false);
  } else {
    std::cout << "Python: not measured: " << failure << "\n";
    report.not_applicable("op_overhead_python_us", python_claim, "more than C++ (reported)", failure, false);
    report.not_applicable("op_overhead_python_over_cpp", ratio_claim, ">= 2x (a goal, reported)", failure, false);
  }

  observe_host_overhead_share(outcome, cpp, report);
  return cpp.add_us;
}

// --- charts -------------------------------------------------------------------------------------------

void plot(const Config& config, const StepProfile& profile, const MeasuredPeaks& peaks,
          const std::vector<OpPoint>& points, const std::string& title) {
  std::ostringstream top;
  for (int i = 0; i < std::min<int>(config.top, static_cast<int>(profile.ops.size())); ++i) {
    std::string name = profile.ops[i].name;
    std::replace(name.begin(), name.end(), '"', '\'');
    top << '"' << name << "\" " << 100 * profile.ops[i].share << ' ' << profile.ops[i].self_ms << ' '
        << profile.ops[i].calls << "\n";
  }
  std::ostringstream roof;
  for (const auto& p : points) roof << '"' << p.id << "\" " << p.intensity() << ' ' << p.achieved_flops() << "\n";
  std::string failure;
  for (const auto& [script, name, data, args] :
       std::vector<std::tuple<std::string, std::string, std::string, std::vector<std::string>>>{
           {"top_ops.gp", "lab07_top_ops", top.str(), {"Top ops by self time, one training step: " + title}},
           {"roofline.gp",
            "lab07_roofline",
            roof.str(),
            {std::to_string(peaks.fp32_flops), std::to_string(peaks.bandwidth()),
             std::to_string(peaks.bf16_flops > peaks.fp32_flops ? peaks.bf16_flops : 0.0),  // a roof only where faster
             "Roofline, measured: " + title}}}) {
    const std::string svg = speedlabs::plot_svg(speedlabs::source_dir() + "/labs/07_profile/src/" + script,
                                                config.plots_dir, name, data, args, failure);
    std::cout << (svg.empty() ? "no chart: " + failure : "chart written to " + svg) << "\n";
  }
}

}  // namespace

void adapt_to_gpu(Config& config) {
  config.batch = 16;
  config.seq = 256;
  config.op_calls = 5000;
  config.matmul_size = 8192;
  config.stream_mib = 1024;
  config.feed_steps = 20;
  config.doc_kib = 4;
}

namespace {

// The sizes the roofline allocates and the loader reads, as products, before any work: a size whose bytes
// overflow, or that this device cannot hold, is the user's input to fix (exit 2), not a failure 15 s in.
void check_sizes(const Config& config, const c10::Device& device) {
  constexpr int64_t kKiB = 1024, kMiB = 1024 * 1024;
  if (config.doc_kib > std::numeric_limits<int64_t>::max() / kKiB) {
    throw speedlabs::UsageError("--doc-kib " + std::to_string(config.doc_kib) + " is too large to count in bytes");
  }
  // The roofs: a, b and c of the matmul in float32 and in bfloat16 (6 bytes per element in all), and the
  // copy's and triad's three arrays.
  int64_t square = 0, matmul_bytes = 0, stream_bytes = 0;
  const bool overflow = __builtin_mul_overflow(config.matmul_size, config.matmul_size, &square) ||
                        __builtin_mul_overflow(square, int64_t{6 * 3}, &matmul_bytes) ||
                        __builtin_mul_overflow(config.stream_mib, 3 * kMiB, &stream_bytes);
  const auto total = speedlabs::total_memory_bytes(device);
  const int64_t needed = overflow ? 0 : std::max(matmul_bytes, stream_bytes);
  if (overflow || (total && needed > *total)) {
    throw speedlabs::UsageError(
        "--matmul-size " + std::to_string(config.matmul_size) + " and --stream-mib " +
        std::to_string(config.stream_mib) + " need " +
        (overflow ? std::string("more bytes than can be counted") : speedlabs::format_bytes(needed)) +
        (total ? " at once; " + device.str() + " has " + speedlabs::format_bytes(*total) : "") +
        ": give smaller sizes");
  }
}

}  // namespace

void run(const Config& config, const c10::Device& device, speedlabs::Report& report) {
  speedlabs::install_stop_handlers();  // Ctrl-C or SIGTERM: stop between steps, end the Python child
  check_sizes(config, device);
  const auto model_config = gpt::GPTConfig::by_name(config.model);
  model_config.require_sequence_fits(config.seq, "--seq " + std::to_string(config.seq));
  const auto data_dir = datasets::resolve_data_dir(config.data_dir);
  const auto tokens = datasets::load_shakespeare_tokens(data_dir).ids;
  const std::string title = config.model + ", B=" + std::to_string(config.batch) + ", T=" + std::to_string(config.seq) +
                            ", " + speedlabs::describe(device);
  std::cout << "lab 07: " << title << "\n";
  // A CPU step that hands its big buffers back to the kernel page-faults them in again every step (lab 06):
  // the trace would show the faults, not the ops. The Python child inherits the same policy.
  const std::string allocator = speedlabs::keep_freed_host_memory();
  std::cout << allocator << "\n";

  part("1. a profiler trace of one training step (warm-up " + std::to_string(config.warmup) + " steps, timed " +
       std::to_string(config.steps) + ", then one profiled)");
  const TraceOutcome outcome = trace_one_step(config, model_config, tokens, device);
  if (!std::isfinite(outcome.profile.loss)) throw speedlabs::RuntimeFailure("the profiled step's loss is not finite");
  std::cout << "median step without the profiler: " << fixed(outcome.step_ms, 2) << " ms\n";
  print_profile(outcome.profile, config.top);
  if (!config.trace_path.empty()) {
    std::cout << "trace written to " << config.trace_path
              << " (open it in https://ui.perfetto.dev or chrome://tracing)\n";
  }
  observe_trace(config, outcome, device, report);

  part("2. the cost of one op, C++ and Python eager");
  const double us_per_op = observe_op_cost(config, outcome, device, report);

  part("3. the roofline of this machine");
  // Rounds are added (up to 7) while any side scatters by more than 10%, within a 3 s budget.
  const speedlabs::TimingOptions timing{config.warmup, std::max(3, config.steps), std::max(7, config.steps), 0.10, 3.0};
  const speedlabs::Roofline roofline = speedlabs::measure_roofline(model_config, config.batch, config.seq, device,
                                                                   config.matmul_size, config.stream_mib, timing);
  const MeasuredPeaks& peaks = roofline.peaks;
  const auto& points = roofline.points;
  speedlabs::print_roofline(peaks, points);
  speedlabs::observe_roofline(roofline, report);

  part("4. the step, accounted, against the measured and the theoretical peak");
  std::vector<StepAccount> accounts;
  const double profiler_us = measure_profiler_us_per_event(device, kProfilerCostRounds);
  for (const auto& profile : outcome.rounds.profiles) {
    accounts.push_back(account_step(profile, us_per_op, profiler_us));
  }
  const StepMeasures measures{outcome.rounds.plain(), peaks,
                              speedlabs::theoretical_peak(device, speedlabs::PeakFormat::fp32),
                              speedlabs::gpt_model_flops_per_step(model_config, config.batch, config.seq)};
  const StepAccount account = observe_step_account(accounts, measures, device, report);
  observe_page_faults(outcome.rounds, allocator, report);

  part("5. keeping the device fed: loading inside the loop vs a prefetching loader");
  const auto tokenizer = datasets::GPT2Tokenizer::load(data_dir);
  const DocumentBatches batches(
      tokenizer, speedlabs::read_file(datasets::require_file(data_dir, datasets::kShakespearePath).string()),
      config.batch, config.seq, config.doc_kib * 1024, device.is_cuda());
  const FeedResult feed =
      compare_loaders(batches, model_config, config.lr, config.warmup, config.feed_steps, config.prefetch, device);
  observe_feeding(feed, device, report);

  if (!config.plots_dir.empty()) {
    plot(config, outcome.profile, peaks, points, title);
    plot_step_account(account, measures, config.plots_dir, title);
  }
}

}  // namespace lab07
