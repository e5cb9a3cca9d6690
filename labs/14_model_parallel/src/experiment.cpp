#include "experiment.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "common/errors.h"
#include "common/format.h"
#include "common/process.h"
#include "common/timer.h"
#include "common/topology.h"
#include "common/workers/launcher.h"
#include "common/workers/losses.h"
#include "datasets/data_files.h"
#include "pipeline.h"
#include "tensor_parallel.h"
#include "worker.h"

namespace lab14 {

namespace {

using speedlabs::fixed;
using speedlabs::scientific;

// The losses of a split model against one worker's, relative. The same float32 products are summed in another
// order: a row-parallel layer adds N partial sums of in/N terms where one worker adds in terms at once, a
// column-parallel backward sums dL/dx the same way, and a pipeline adds M micro-batches' mean losses (and
// their gradients) instead of one mean over the batch. Each such sum differs from one worker's in the last bit
// or two (float32: about 6e-8 relative), and AdamW keeps such differences relative as it steps; lab 10 measured
// about 2e-7 over 20 steps for a change of the same kind. 1e-4 leaves a margin of hundreds over that and still
// catches a real mistake: a missing all-reduce, a bias added N times, the wrong heads' rows, a micro-batch's
// gradient counted twice or dropped all change the loss in its 2nd or 3rd digit.
constexpr double kLossRtol = 1e-4;
// The bubble: measured idle share of the pipeline's phase against (N-1)/(M+N-1), absolute. The formula assumes
// stages of equal work and messages that take no time. Here the last stage also runs ln_f, the head and the loss:
// per token 2 C V = 33k floating-point operations against 2 x 24 C^2 = 197k for its two blocks' matrices at C = 64 (V =
// 256), about 15% more work (8% at C = 128). With 2 stages, the last one r = 1.15 times slower, the mean idle share is
// 1 - M (1 + r) / (2 (1 + M r)): +0.00 at M = 1, +0.03 at M = 4, +0.05 at M = 8 above the formula. Messages
// (one activation of 16-128 KiB per micro-batch, in shared memory) add microseconds. 0.08 holds those with room,
// and stays far below the formula's steps between M = 1, 2, 4, 8 (0.5, 0.33, 0.2, 0.11 at N = 2).
constexpr double kBubbleTolerance = 0.08;

using speedlabs::workers::max_relative_difference;

Job base_job(const Config& config, const std::string& kind) {
  Job job;
  job.kind = kind;
  job.n_layer = config.n_layer;
  job.n_head = config.n_head;
  job.n_embd = config.n_embd;
  job.batch = config.batch;
  job.seq = config.seq;
  job.steps = config.steps;
  job.lr = config.lr;
  job.seed = config.seed;
  job.micro_batches = micro_batches_of(config);
  job.schedules = schedules_of(config);
  job.data_dir = datasets::resolve_data_dir(config.data_dir).string();
  return job;
}

speedlabs::workers::Launched launch(const Config& config, const std::string& kind, int workers) {
  const auto launch = speedlabs::workers::launch_of(config, workers, "lab14 worker",
                                                    std::to_string(workers) + "-worker " + kind + " job");
  std::cout << "starting the " << launch.name << " (C=" << config.n_embd << ", " << config.n_layer
            << " blocks, B=" << config.batch << ", T=" << config.seq << ")" << std::endl;
  return speedlabs::workers::launch_mpi_job(launch, to_json(base_job(config, kind)));
}

// What the three jobs returned.
struct Jobs {
  std::vector<double> reference;  // one worker's losses
  nlohmann::json tp, pp;
  speedlabs::Contention pp_contention;
};

void observe_tensor_parallel(const Config& config, const Jobs& jobs, speedlabs::Report& report) {
  const int n = config.tp;
  const std::string workers = std::to_string(n) + " workers";
  const double diff = max_relative_difference(jobs.tp.at("losses").get<std::vector<double>>(), jobs.reference);
  report.check("tp_same_losses_as_one_worker",
               "with every block's matrices split over " + workers +
                   " (attention by heads, the MLP by columns then "
                   "rows), training gives one worker's losses, step by step",
               {{"max_relative_difference", diff}, {"steps", config.steps}},
               "<= " + scientific(kLossRtol, 1) + " relative (float32 sums in another order)", diff <= kLossRtol);

  const double split = static_cast<double>(jobs.tp.at("split_bytes").get<int64_t>());
  const double whole = 4.0 * config.n_layer * static_cast<double>(split_elements_per_block(config.n_embd));
  report.check("tp_weights_per_worker",
               "each worker allocates 1/N of the split matrices and their biases (12 C^2 + 7 C elements per block), "
               "counted by the counting allocator",
               {{"bytes", split}, {"formula_bytes", whole / n}, {"whole_bytes", whole}, {"share", split / whole}},
               "exactly 4 x L x (12 C^2 + 7 C) / N bytes", split == whole / n);

  const auto sent = jobs.tp.at("bytes_sent").get<std::vector<double>>();
  const double formula = tp_bytes_formula(config);
  const bool every_step = std::all_of(sent.begin(), sent.end(), [&](double s) { return s == formula; });
  report.check("tp_bytes_sent_per_step",
               "bytes each worker sends per step, counted by the communicator: per block two all-reduces of B x T x C "
               "float32 in the forward and two in the backward, each 2 (N-1)/N of the buffer as a ring sends it",
               {{"bytes", *std::max_element(sent.begin(), sent.end())},
                {"formula_bytes", formula},
                {"activation_bytes", 4.0 * config.batch * config.seq * config.n_embd}},
               "equal to 4 x L x 2 (N-1)/N x 4 B T C bytes, every step", every_step);
}

// One step of one run: each stage's idle share of the pipeline's phase, averaged over the stages.
double bubble_of_step(const std::vector<int64_t>& times, int stages) {
  const size_t per_stage = times.size() / static_cast<size_t>(stages);
  int64_t start = times[0], end = times[0];
  for (int s = 0; s < stages; ++s) {
    start = std::min(start, times[s * per_stage]);
    end = std::max(end, times[s * per_stage + per_stage - 1]);
  }
  double idle = 0;
  for (int s = 0; s < stages; ++s) {
    int64_t busy = 0;
    for (size_t k = 1; k + 1 < per_stage; k += 2) busy += times[s * per_stage + k + 1] - times[s * per_stage + k];
    idle += 1.0 - static_cast<double>(busy) / static_cast<double>(end - start);
  }
  return idle / stages;
}

void observe_pipeline_losses(const Config& config, const Jobs& jobs, speedlabs::Report& report) {
  nlohmann::json measured;
  double worst = 0;
  for (const auto& run : jobs.pp.at("runs")) {
    const double diff = max_relative_difference(run.at("losses").get<std::vector<double>>(), jobs.reference);
    measured[run.at("schedule").get<std::string>() + "_M" + std::to_string(run.at("micro_batches").get<int>())] = diff;
    worst = std::max(worst, diff);
  }
  measured["max_relative_difference"] = worst;
  report.check("pp_same_losses_as_one_worker",
               "with the blocks split into " + std::to_string(config.pp) +
                   " stages and the batch into M "
                   "micro-batches, every schedule and M gives one worker's losses, step by step",
               measured, "<= " + scientific(kLossRtol, 1) + " relative for every run", worst <= kLossRtol);
}

// The median forward and backward of each stage in @p run, in ms, over the steps after the first: what the
// formula assumes equal across the stages.
nlohmann::json stage_op_ms(const nlohmann::json& run, int stages) {
  const int m = run.at("micro_batches").get<int>();
  const std::string schedule = run.at("schedule").get<std::string>();
  nlohmann::json out{{"forward", nlohmann::json::array()}, {"backward", nlohmann::json::array()}};
  for (int s = 0; s < stages; ++s) {
    const auto ops = schedule_for(schedule, s, stages, m);
    std::vector<double> forward, backward;
    for (size_t step = 1; step < run.at("times").size(); ++step) {
      const auto times = run.at("times")[step].get<std::vector<int64_t>>();
      const size_t base = static_cast<size_t>(s) * (times.size() / static_cast<size_t>(stages));
      for (size_t k = 0; k < ops.size(); ++k) {
        const double ms = static_cast<double>(times[base + 2 + 2 * k] - times[base + 1 + 2 * k]) / 1e6;
        (ops[k].kind == PipeOp::forward ? forward : backward).push_back(ms);
      }
    }
    out["forward"].push_back(speedlabs::summarize_samples(forward).median);
    out["backward"].push_back(speedlabs::summarize_samples(backward).median);
  }
  return out;
}

void observe_bubble(const Config& config, const Jobs& jobs, speedlabs::Report& report) {
  const int n = config.pp;
  nlohmann::json measured;
  std::vector<double> worst_per_step(static_cast<size_t>(config.steps - 1), 0.0);
  std::vector<speedlabs::Bound> bounds;
  for (const auto& run : jobs.pp.at("runs")) {
    const int m = run.at("micro_batches").get<int>();
    const std::string key = run.at("schedule").get<std::string>() + "_M" + std::to_string(m);
    std::vector<double> shares;
    for (size_t step = 1; step < run.at("times").size(); ++step) {  // after the first step's allocations
      shares.push_back(bubble_of_step(run.at("times")[step].get<std::vector<int64_t>>(), n));
      const double off = std::abs(shares.back() - bubble_formula(n, m));
      worst_per_step[step - 1] = std::max(worst_per_step[step - 1], off);
    }
    const double median = speedlabs::summarize_samples(shares).median;
    measured[key] = median;
    measured[key + "_formula"] = bubble_formula(n, m);
    if (m == config.micro_batches) measured[key + "_stage_ms"] = stage_op_ms(run, n);
    bounds.push_back({"idle share, " + key, median, 0, 1});
  }
  speedlabs::Evidence evidence(speedlabs::summarize_samples(worst_per_step), jobs.pp_contention,
                               // Idle time: a slowed stage makes the others wait any multiple of their quiet idle.
                               speedlabs::LoadEffect::unknown);
  evidence.bounds = bounds;
  measured["largest_distance_from_formula"] = evidence.value.median;
  std::string why;
  const bool hold = bubble_can_be_held(n, why);
  auto& observation = report.decide(
      "pp_bubble_share",
      "each stage is idle for (N-1)/(M+N-1) of the pipeline's time, for every M and both schedules: the measured "
      "idle share, averaged over the stages, per M",
      measured, "within " + fixed(kBubbleTolerance, 2) + " of (N-1)/(M+N-1)" + (hold ? "" : " (reported: " + why + ")"),
      evidence, [](double distance) { return distance <= kBubbleTolerance; }, hold);
  (void)observation;
}

void observe_activations(const Config& config, const Jobs& jobs, speedlabs::Report& report) {
  const int n = config.pp;
  if (schedules_of(config).size() < 2) {
    report.not_applicable("pp_activation_peak_per_schedule", "1F1B holds fewer micro-batches than GPipe",
                          "at most N for 1F1B, M for GPipe", "this run has one schedule (--schedule)");
    return;
  }
  nlohmann::json measured;
  bool holds = true;
  for (const auto& run : jobs.pp.at("runs")) {
    const int m = run.at("micro_batches").get<int>();
    const bool gpipe = run.at("schedule").get<std::string>() == "gpipe";
    int most = 0;
    int64_t bytes = 0;
    const auto held = run.at("most_in_flight").back().get<std::vector<int64_t>>();  // per stage: count, bytes
    for (size_t i = 0; i + 1 < held.size(); i += 2) {
      most = std::max(most, static_cast<int>(held[i]));
      bytes = std::max(bytes, held[i + 1]);
    }
    const std::string key = run.at("schedule").get<std::string>() + "_M" + std::to_string(m);
    measured[key] = most;
    measured[key + "_bytes"] = bytes;
    holds = holds && (gpipe ? most == m : most == std::min(n, m));
  }
  report.check("pp_activation_peak_per_schedule",
               "the most micro-batches a stage holds between forward and backward, counted as the stages run: M "
               "under GPipe, at most N under 1F1B (so fewer once M > N); their bytes as the allocator counted them",
               measured, "GPipe = M, 1F1B = min(N, M)", holds);
}

void write_timelines(const Config& config, const Jobs& jobs) {
  if (config.plots_dir.empty()) return;
  for (const auto& run : jobs.pp.at("runs")) {
    if (run.at("micro_batches").get<int>() != config.micro_batches) continue;
    const auto path =
        std::filesystem::path(config.plots_dir) / ("lab14_timeline_" + run.at("schedule").get<std::string>() + ".svg");
    std::ofstream(path) << timeline_svg(run, config.pp);
    std::cout << "timeline: " << path.string() << "\n";
  }
}

}  // namespace

std::vector<int> micro_batches_of(const Config& config) {
  std::vector<int> out;
  for (int m : {1, 2, 4, 8}) {
    if (config.batch % m == 0) out.push_back(m);
  }
  if (std::find(out.begin(), out.end(), config.micro_batches) == out.end()) out.push_back(config.micro_batches);
  return out;
}

std::vector<std::string> schedules_of(const Config& config) {
  if (config.schedule == "both") return {"gpipe", "1f1b"};
  return {config.schedule};
}

double tp_bytes_formula(const Config& config) {
  const double n = config.tp, activation = 4.0 * config.batch * config.seq * config.n_embd;
  return config.n_layer * 4 * (2 * (n - 1) / n) * activation;
}

bool bubble_can_be_held(int stages, std::string& why) {
  const auto topology = speedlabs::read_cpu_topology();
  if (topology.physical_cores > 0 && stages > topology.physical_cores) {
    why = std::to_string(stages) + " stages on " + std::to_string(topology.physical_cores) + " physical cores";
    return false;
  }
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0 && line.find(" hypervisor") != std::string::npos) {
      why = "a virtual machine, whose cores may be shared unseen";
      return false;
    }
  }
  return true;
}

void validate(const Config& config) {
  const auto fail = [](const std::string& why) { throw speedlabs::UsageError(why); };
  if (config.tp < 2 || config.pp < 2) fail("--tp and --pp must be at least 2");
  speedlabs::workers::validate_launch(config, std::max(config.tp, config.pp));
  if (config.n_head % config.tp != 0 || config.n_embd % config.n_head != 0) {
    fail("--tp " + std::to_string(config.tp) + " does not divide the model's " + std::to_string(config.n_head) +
         " heads (and --embd must be a multiple of the heads)");
  }
  if (config.n_layer % config.pp != 0) {
    fail("--pp " + std::to_string(config.pp) + " does not divide the model's " + std::to_string(config.n_layer) +
         " blocks");
  }
  if (config.micro_batches < 1 || config.batch % config.micro_batches != 0) {
    fail("--micro-batches must be at least 1 and divide --batch " + std::to_string(config.batch));
  }
  if (config.steps < 2) fail("--steps must be at least 2 (the first step's times are left out)");
  if (config.seq < 1 || config.seq > 128) fail("--seq must be 1 to 128, the model's block size");
  const unsigned cpus = std::thread::hardware_concurrency();
  const int most = std::max(config.tp, config.pp);
  if (cpus > 0 && static_cast<unsigned>(most) > cpus) {
    fail(std::to_string(most) + " workers on " + std::to_string(cpus) +
         " logical CPUs: this machine cannot give each worker a CPU of its own");
  }
}

void run(const Config& config, speedlabs::Report& report) {
  validate(config);
  speedlabs::install_stop_handlers();
  Jobs jobs;
  jobs.reference = launch(config, "reference", 1).result.at("losses").get<std::vector<double>>();
  jobs.tp = launch(config, "tp", config.tp).result;
  auto pp = launch(config, "pp", config.pp);
  jobs.pp = pp.result;
  jobs.pp_contention = pp.contention;
  observe_tensor_parallel(config, jobs, report);
  observe_pipeline_losses(config, jobs, report);
  observe_bubble(config, jobs, report);
  observe_activations(config, jobs, report);
  write_timelines(config, jobs);
}

}  // namespace lab14
