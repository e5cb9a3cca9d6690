#include "experiment.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include "common/build_paths.h"
#include "common/errors.h"
#include "common/format.h"
#include "common/plot.h"
#include "common/process.h"
#include "common/sequential.h"
#include "common/timer.h"
#include "common/workers/launcher.h"
#include "common/workers/losses.h"
#include "datasets/data_files.h"

namespace lab11 {

namespace {

using speedlabs::fixed;
using speedlabs::scientific;

// The losses of N workers against one worker's, relative. The same float32 terms are summed in another order
// (each worker's B/N rows, then the all-reduce or reduce-scatter adds the N partial sums; the token
// embedding's gradient is added from the head and from the lookup in two steps instead of autograd's one), so
// the gradients differ in the last bits and AdamW keeps such differences relative: lab 10 measured about 2e-7
// over 20 steps. 1e-4 leaves a margin of hundreds and still catches a real error: a worker stepping with its
// own rows' gradient, a shard updated with another's gradient or a stale gather changes the loss in the 3rd
// digit or earlier.
constexpr double kLossRtol = 1e-4;
// Bytes against their formulas. The counting allocator counts exactly what tensors ask for and the
// communicator exactly what each collective sends, so the only differences are the padding (each unit rounded
// up to a multiple of N: at most N-1 elements per unit) and, in the optimizer state, libtorch's AdamW
// keeping none for padding: far below 1%. 5% (the issue's) leaves room for small tensors that come and go.
constexpr double kBytesRtol = 0.05;
// The peak against the sum of its parts: the activations are taken from stage 0's measured peak (the same
// batch per worker at every stage) and the transient buffers (a unit's full gradient before its
// reduce-scatter, the root unit gathered at stage 3) are estimated from the unit sizes; 20% covers what moves
// between them (autograd's temporaries differ a little when backward runs a block at a time).
constexpr double kPeakRtol = 0.20;

double relative(double measured, double expected) { return std::abs(measured - expected) / std::abs(expected); }

using speedlabs::workers::max_relative_difference;

// The steps after the first (allocation and first-touch costs), summarised.
speedlabs::Summary after_first_step(const std::vector<double>& values) {
  return speedlabs::summarize_samples(std::vector<double>(values.begin() + (values.size() > 1 ? 1 : 0), values.end()));
}

// Starts @p workers workers training @p stages.
nlohmann::json run_job(const Config& config, int workers, const std::vector<int>& stages,
                       speedlabs::Contention& contention) {
  Job job;
  job.model = config.model;
  job.batch = config.batch;
  job.seq = config.seq;
  job.steps = config.steps;
  job.lr = config.lr;
  job.seed = config.seed;
  job.stages = stages;
  job.data_dir = datasets::resolve_data_dir(config.data_dir).string();
  const auto launch =
      speedlabs::workers::launch_of(config, workers, "lab11 worker", std::to_string(workers) + "-worker job");
  std::cout << "starting the " << launch.name << " (" << config.model << ", B=" << config.batch << ", T=" << config.seq
            << ", " << (stages == std::vector<int>{-1} ? std::string("plain training") : "stages");
  for (int s : stages) {
    if (s >= 0) std::cout << " " << s;
  }
  std::cout << ")" << std::endl;
  auto launched = speedlabs::workers::launch_mpi_job(launch, to_json(job));
  contention = launched.contention;
  return launched.result;
}

// @p transients: each stage's transient bytes by the formula (Jobs::transients), drawn with the activations as
// the measured side draws them, so that both bars are the peak formula the observation holds to.
std::string write_plot(const std::string& dir, const std::vector<int>& stages, const nlohmann::json& per_stage,
                       const std::vector<Predicted>& predicted, double activations,
                       const std::vector<double>& transients) {
  std::ostringstream data;
  for (size_t i = 0; i < stages.size(); ++i) {
    const auto& m = per_stage.at(std::to_string(stages[i])).at("memory");
    const Predicted& p = predicted[i];
    data << "\"" << stages[i] << " formula\" " << speedlabs::to_mib(p.weights) << " " << speedlabs::to_mib(p.gradients)
         << " " << speedlabs::to_mib(p.optimizer) << " " << speedlabs::to_mib(activations + transients[i]) << "\n";
    data << "\"" << stages[i] << " measured\" " << speedlabs::to_mib(m["parameters_at_rest"].get<double>()) << " "
         << speedlabs::to_mib(m["gradients"].get<double>()) << " "
         << speedlabs::to_mib(m["optimizer_state"].get<double>()) << " "
         << speedlabs::to_mib(m["activations_and_transients"].get<double>()) << "\n";
  }
  std::string failure;
  const std::string svg = speedlabs::plot_svg(speedlabs::source_dir() + "/labs/11_sharding/src/bytes_per_worker.gp",
                                              dir, "lab11_bytes_per_worker", data.str(), {}, failure);
  return svg.empty() ? "no plot: " + failure : "plot: " + svg;
}

}  // namespace

void validate(const Config& config) {
  speedlabs::workers::validate_launch(config, config.workers);
  speedlabs::workers::validate_batch_split(config.batch, config.workers);
  if (config.steps < 3)
    throw speedlabs::UsageError("--steps must be at least 3 (the optimizer state is measured after the first)");
  if (config.stage != "all" && (config.stage.size() != 1 || config.stage[0] < '0' || config.stage[0] > '3')) {
    throw speedlabs::UsageError("--stage must be 0, 1, 2, 3 or all, not '" + config.stage + "'");
  }
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores > 0 && static_cast<unsigned>(config.workers) > cores) {
    std::cerr << "warning: " << config.workers << " workers on " << cores
              << " cores: they take turns, so the step times say little (the bytes and losses are unchanged)\n";
  }
}

std::vector<int> stages_of(const Config& config) {
  if (config.stage == "all") return {0, 1, 2, 3};
  const int stage = config.stage[0] - '0';
  return stage == 0 ? std::vector<int>{0} : std::vector<int>{0, stage};
}

Predicted predict(int stage, int64_t parameters, int64_t padded, int workers) {
  const double p = static_cast<double>(parameters), n = workers, share = (n - 1) / n;
  Predicted out;
  out.weights = stage < 3 ? 4 * static_cast<double>(padded) : 4 * p / n;
  out.gradients = stage < 2 ? 4 * static_cast<double>(padded) : 4 * p / n;
  out.optimizer = stage == 0 ? 8 * p : 8 * p / n;
  out.bytes_sent = (stage == 1 || stage == 3 ? 3 : 2) * share * 4 * p;
  return out;
}

namespace {

// What the two jobs returned: one worker with the whole batch, and N workers at each stage of the run.
struct Jobs {
  std::vector<int> stages;
  int n = 0;
  nlohmann::json many;                    // the N-worker job's result
  speedlabs::Contention many_contention;  // the launcher's reading of the machine around it
  std::vector<double> single_losses;      // one worker's losses, step by step
  int64_t parameters = 0;
  int64_t padded = 0;                // every unit's padded elements
  int64_t root_padded = 0;           // the root unit's
  std::vector<Predicted> predicted;  // per stage of the run, from the formulas

  const nlohmann::json& stage(int s) const { return many.at("stages").at(std::to_string(s)); }
  double memory(int s, const char* what) const { return stage(s).at("memory").at(what).get<double>(); }
  std::string workers() const { return std::to_string(n) + " workers"; }
  // What stage @p s's peak adds to the bytes that stay: at stages 2-3 the root unit's full gradient until its
  // reduce-scatter at the end of backward; at stage 3 also the root unit gathered for the head's forward and
  // backward.
  double transients(int s) const {
    const double root_unit = 4.0 * static_cast<double>(root_padded) * (n - 1) / n;
    return (s >= 2 ? root_unit : 0.0) + (s == 3 ? root_unit : 0.0);
  }
};

Jobs run_jobs(const Config& config) {
  Jobs jobs;
  jobs.n = config.workers;
  jobs.stages = stages_of(config);
  speedlabs::Contention one_contention;
  const auto one = run_job(config, 1, {-1}, one_contention);
  jobs.many = run_job(config, jobs.n, jobs.stages, jobs.many_contention);
  jobs.single_losses = one.at("stages").at("-1").at("losses").get<std::vector<double>>();
  jobs.parameters = jobs.many.at("parameters").get<int64_t>();
  jobs.root_padded = jobs.many.at("unit_padded_elements").at(0).get<int64_t>();
  for (const auto& unit : jobs.many.at("unit_padded_elements")) jobs.padded += unit.get<int64_t>();
  for (int s : jobs.stages) jobs.predicted.push_back(predict(s, jobs.parameters, jobs.padded, jobs.n));
  return jobs;
}

// Sharding changes where the training state lives, never what training computes.
void observe_training(const Config& config, const Jobs& jobs, speedlabs::Report& report) {
  nlohmann::json losses, in_sync;
  bool losses_hold = true, sync_holds = true;
  for (int s : jobs.stages) {
    const double diff =
        max_relative_difference(jobs.stage(s).at("losses").get<std::vector<double>>(), jobs.single_losses);
    losses["stage" + std::to_string(s)] = diff;
    losses_hold = losses_hold && diff <= kLossRtol;
    if (s < 3) {
      const auto flags = jobs.stage(s).at("in_sync").get<std::vector<bool>>();
      const bool all = std::all_of(flags.begin(), flags.end(), [](bool b) { return b; });
      in_sync["stage" + std::to_string(s)] = all;
      sync_holds = sync_holds && all;
    }
  }
  losses["steps"] = config.steps;
  report.check(
      "same_losses_as_one_worker",
      "at every stage, " + jobs.workers() + " give the losses of one worker with the whole batch, step by step", losses,
      "<= " + scientific(kLossRtol, 1) + " relative at every stage (float32 sums in another order)", losses_hold);
  report.check("weights_stay_in_sync",
               "at stages 0-2, after every step every worker's full weights are bit-for-bit the same (stage 3 keeps "
               "disjoint shards at rest: its losses show it right)",
               in_sync, "equal after every step", sync_holds);
}

// The bytes per worker, measured and from the formulas, stage by stage, and whether each holds.
struct MemoryTable {
  nlohmann::json opt, grads, weights, peaks;
  bool opt_holds = true, grads_holds = true, weights_holds = true, peaks_hold = true;
};

MemoryTable memory_table(const Jobs& jobs) {
  const int n = jobs.n;
  const double opt0 = jobs.memory(0, "optimizer_state"), weights0 = jobs.memory(0, "parameters_at_rest");
  MemoryTable t;
  t.opt = {{"stage0", opt0}};
  t.weights = {{"stage0", weights0}};
  const double activations0 = jobs.memory(0, "activations_and_transients");
  for (size_t i = 0; i < jobs.stages.size(); ++i) {
    const int s = jobs.stages[i];
    const Predicted& predicted = jobs.predicted[i];
    const std::string key = "stage" + std::to_string(s);
    t.grads[key] = jobs.memory(s, "gradients");
    t.grads[key + "_formula"] = predicted.gradients;
    if (s >= 2)
      t.grads_holds = t.grads_holds && relative(jobs.memory(s, "gradients"), predicted.gradients) <= kBytesRtol;
    if (s >= 1) {
      t.opt[key] = jobs.memory(s, "optimizer_state");
      t.opt_holds = t.opt_holds && relative(jobs.memory(s, "optimizer_state"), opt0 / n) <= kBytesRtol;
      t.weights[key] = jobs.memory(s, "parameters_at_rest");
    }
    if (s == 3) t.weights_holds = relative(jobs.memory(3, "parameters_at_rest"), weights0 / n) <= kBytesRtol;
    // The peak: what stays (weights, optimizer state), the gradient held when the optimizer steps, stage 0's
    // activations, and the stage's transients.
    const double formula =
        predicted.weights + predicted.optimizer + predicted.gradients + activations0 + jobs.transients(s);
    t.peaks[key] = jobs.memory(s, "peak");
    t.peaks[key + "_formula"] = formula;
    t.peaks_hold = t.peaks_hold && relative(jobs.memory(s, "peak"), formula) <= kPeakRtol;
  }
  t.opt["stage0_over_n"] = opt0 / n;
  return t;
}

void observe_memory(const Config& config, const Jobs& jobs, speedlabs::Report& report) {
  if (config.device != "cpu") {
    for (const char* id : {"optimizer_state_bytes_per_worker", "gradient_bytes_per_worker",
                           "parameter_bytes_at_rest_per_worker", "peak_bytes_per_worker"}) {
      report.not_applicable(id, "the bytes each worker holds, by stage", "see the lesson",
                            "memory is counted by the CPU's counting allocator (common/host_memory.h); on GPUs "
                            "this lab does not measure it");
    }
    return;
  }
  const MemoryTable t = memory_table(jobs);
  const std::vector<int>& stages = jobs.stages;
  const std::string n = std::to_string(jobs.n);
  report.check("optimizer_state_bytes_per_worker",
               "AdamW's moments per worker: 8 bytes per parameter at stage 0, 1/N of that once sharded (stages 1-3), "
               "measured by the counting allocator",
               t.opt, "stages 1-3 within 5% of stage 0's / " + n, t.opt_holds);
  if (std::any_of(stages.begin(), stages.end(), [](int s) { return s >= 2; })) {
    report.check("gradient_bytes_per_worker",
                 "the gradient a worker holds when the optimizer steps: 4 bytes per parameter at stages 0-1, its "
                 "shard alone, 4 P / N, once reduce-scattered (stages 2-3)",
                 t.grads, "stages 2-3 within 5% of 4 P / N", t.grads_holds);
  } else {
    report.not_applicable("gradient_bytes_per_worker", "the gradient shard of stages 2-3", "within 5% of 4 P / N",
                          "this run trains no stage above 1 (--stage)");
  }
  if (std::find(stages.begin(), stages.end(), 3) != stages.end()) {
    report.check("parameter_bytes_at_rest_per_worker",
                 "between steps a stage 3 worker keeps 1/N of the weights (4 P / N bytes), stages 0-2 all of them",
                 t.weights, "stage 3 within 5% of stage 0's / " + n, t.weights_holds);
  } else {
    report.not_applicable("parameter_bytes_at_rest_per_worker", "stage 3 keeps 1/N of the weights at rest",
                          "within 5% of stage 0's / N", "this run does not train stage 3 (--stage)");
  }
  report.check("peak_bytes_per_worker",
               "each stage's peak per worker against its formula: weights + gradients + optimizer state (as "
               "above) + stage 0's activations + the root unit's full gradient (stages 2-3) and gathered weights "
               "(stage 3) while backward holds them",
               t.peaks, "within 20% of the formula (reported)", t.peaks_hold, /*must_hold=*/false);
}

// Returns the bytes sent per step, by stage, for the summary line.
nlohmann::json observe_bytes_sent(const Jobs& jobs, speedlabs::Report& report) {
  nlohmann::json sent;
  bool sent_holds = true;
  for (size_t i = 0; i < jobs.stages.size(); ++i) {
    const int s = jobs.stages[i];
    const auto per_step = jobs.stage(s).at("bytes_sent").get<std::vector<double>>();
    const double measured = *std::max_element(per_step.begin(), per_step.end());
    const double least = *std::min_element(per_step.begin(), per_step.end());
    sent["stage" + std::to_string(s)] = measured;
    sent["stage" + std::to_string(s) + "_formula"] = jobs.predicted[i].bytes_sent;
    sent_holds = sent_holds && least == measured && relative(measured, jobs.predicted[i].bytes_sent) <= kBytesRtol;
  }
  sent["gradient_bytes"] = 4.0 * static_cast<double>(jobs.parameters);
  report.check("bytes_sent_per_step",
               "bytes each worker sends per step, counted by the communicator as a ring sends them: 2(N-1)/N x the "
               "gradient's bytes at stages 0 and 2 (all-reduce; reduce-scatter + all-gather), 3(N-1)/N at stage 1 "
               "(all-reduce + all-gather) and stage 3 (two all-gathers + reduce-scatter)",
               sent, "within 5% of the formula, the same every step", sent_holds);
  return sent;
}

// Step times: each stage is a run of its own in one job (they cannot be interleaved without holding every
// stage's state at once, which would spoil the memory counts), so the comparison is of whole runs, one
// after the other: rank 0's per-step times after the first step, their ratio by ratio_of_sequential (median
// over median, quartiles crossed), and the launcher's reading of the machine around the job.
void observe_step_time(const Jobs& jobs, speedlabs::Report& report) {
  nlohmann::json times;
  for (int s : jobs.stages) {
    const auto summary = after_first_step(jobs.stage(s).at("step_ms").get<std::vector<double>>());
    times["stage" + std::to_string(s) + "_ms"] = summary.median;
    times["stage" + std::to_string(s) + "_spread"] = summary.spread();
  }
  const int last = jobs.stages.back();
  if (last == 0) {
    report.not_applicable("step_time_per_stage", "a sharded stage's step against stage 0's", "reported",
                          "this run trains stage 0 only (--stage 0)", /*must_hold=*/false);
    return;
  }
  speedlabs::Evidence evidence(
      speedlabs::ratio_of_sequential(after_first_step(jobs.stage(last).at("step_ms").get<std::vector<double>>()),
                                     after_first_step(jobs.stage(0).at("step_ms").get<std::vector<double>>())),
      jobs.many_contention,
      // Not bounded by one reading: the stages ran one after another under one job-wide reading, and a sharded
      // step waits in its gathers for a slowed peer any multiple of its quiet time.
      speedlabs::LoadEffect::unknown);
  evidence.bounds = {speedlabs::positive_finite("stage 0 ms per step", times["stage0_ms"].get<double>()),
                     speedlabs::positive_finite("stage " + std::to_string(last) + " ms per step",
                                                times["stage" + std::to_string(last) + "_ms"].get<double>())};
  times["ratio_stage" + std::to_string(last) + "_over_stage0"] = evidence.value.median;
  report.decide(
      "step_time_per_stage",
      "each stage's step time, side by side; stage " + std::to_string(last) +
          " pays for its extra communication and bookkeeping with a slower step than stage 0",
      times, "stage " + std::to_string(last) + " / stage 0 > 1 (reported)", evidence, [](double r) { return r > 1; },
      /*must_hold=*/false);
}

void print_summary(const Config& config, const Jobs& jobs, const nlohmann::json& sent) {
  if (config.device == "cpu" && !config.plots_dir.empty()) {
    std::vector<double> transients;
    for (int s : jobs.stages) transients.push_back(jobs.transients(s));
    std::cout << "\n"
              << write_plot(config.plots_dir, jobs.stages, jobs.many.at("stages"), jobs.predicted,
                            jobs.memory(0, "activations_and_transients"), transients)
              << "\n";
  }
  std::cout << "\n  " << jobs.workers() << ", " << jobs.parameters << " parameters (" << jobs.padded
            << " padded): bytes sent per step";
  for (int s : jobs.stages)
    std::cout << "  stage " << s << ": " << fixed(sent["stage" + std::to_string(s)].get<double>() / 1e6, 2) << " MB";
  std::cout << "\n";
}

}  // namespace

void run(const Config& config, speedlabs::Report& report) {
  validate(config);
  speedlabs::install_stop_handlers();
  const Jobs jobs = run_jobs(config);
  observe_training(config, jobs, report);
  observe_memory(config, jobs, report);
  const nlohmann::json sent = observe_bytes_sent(jobs, report);
  observe_step_time(jobs, report);
  print_summary(config, jobs, sent);
}

}  // namespace lab11
