/// @file labs/10_data_parallel/src/experiment.h
/// @brief Lab 10: data-parallel training of the tiny GPT-2 on N MPI workers, checked against one worker.
///
/// The launcher (this file) starts the jobs with the workers' launcher (common/workers/launcher.h), reads what rank 0
/// measured, and turns it into observations; worker.h is what runs inside each worker.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/contention.h"
#include "common/observations.h"
#include "common/topology.h"
#include "common/workers/job_flags.h"
#include "common/workers/launcher.h"
#include "worker.h"

namespace lab10 {

/// The experiment's knobs; how its jobs start (device, host file, limits) is common/workers' LaunchConfig.
struct Config : speedlabs::workers::LaunchConfig {
  std::string model = "tiny";  ///< speedlabs::gpt::GPTConfig preset: "tiny" or "gpt2"
  int workers = 2;             ///< N, the worker processes of the data-parallel jobs
  int64_t batch = 16;          ///< global batch B (split evenly over the workers)
  int64_t seq = 64;            ///< T
  int steps = 20;              ///< training steps per mode
  double lr = 1e-3;            ///< AdamW learning rate
  uint64_t seed = 42;          ///< initial weights and batches, the same for every job and mode
  double bucket_mb = 25;       ///< bucket size in MiB (PyTorch DDP's default)
  int micro_batches = 4;       ///< K of the gradient-accumulation check (must divide B)
  std::string data_dir;        ///< --data-dir ("" = $SPEEDLABS_DATA_DIR, then data/ in the checkout)
};

/// The lab's knobs, each once: its flags with their defaults (Config) and --quick values. --quick trains the
/// tiny model for fewer steps (seconds on a CPU) on 512 tokens a step: enough that the part of a step that N
/// workers split outweighs what each pays in full (the optimizer step, the all-reduce), so scaling_efficiency
/// measures the method; at B=4, T=16 two workers were no faster than one.
inline speedlabs::Knobs<Config> knobs() {
  namespace workers = speedlabs::workers;
  speedlabs::Knobs<Config> knobs;
  workers::workers_flag(knobs);
  knobs.model_flag(&Config::model);
  workers::batch_flag(knobs).quick(8);
  workers::seq_flag(knobs);
  workers::steps_flag(knobs, "training steps per mode").quick(10);
  knobs.flag("--bucket-mb", "gradient bucket size in MiB (PyTorch DDP's default: 25)", &Config::bucket_mb)
      .check(speedlabs::finite_above());
  knobs.flag("--micro-batches", "K of the gradient-accumulation check (must divide --batch)", &Config::micro_batches)
      .check(speedlabs::at_least(1));
  workers::hostfile_flag(knobs);
  knobs.data_dir_flag(&Config::data_dir);
  return knobs;
}

/// What --quick runs before any flag (the tests start from it).
inline Config quick_config() { return knobs().quick(); }

/// Rejects what cannot run before a worker starts (speedlabs::UsageError): B not divisible by N or K,
/// a --bucket-mb that is not a bucket size (bucket_bytes), fewer than two workers, a GPU run in a build without NCCL or
/// with fewer GPUs on this machine than workers.
/// @param config the run
void validate(const Config& config);

/// What one mode measured on rank 0, step by step.
struct ModeTrace {
  std::vector<double> losses;   ///< the global batch's loss after each step's forward
  std::vector<double> step_ms;  ///< forward + backward + gradient sync + optimizer step
  std::vector<double> comm_ms;  ///< of which inside MPI calls (not hidden behind computation)
  std::vector<bool> in_sync;    ///< every worker's weights bit-for-bit equal after the step
};

/// What a job measured (rank 0's file).
struct JobResult {
  int workers = 0;                           ///< N
  int64_t parameters = 0;                    ///< distinct parameters; the gradient is 4 bytes each
  int64_t buckets = 0;                       ///< buckets of --bucket-mb
  double allreduce_ms = 0;                   ///< median time of one all-reduce of every gradient in one buffer (N > 1)
  std::vector<double> allreduce_samples_ms;  ///< each timed all-reduce of that benchmark (N > 1)
  /// How busy the machine was while the job ran, read by the launcher around mpirun: the workers are its
  /// reaped descendants, so their CPU counts as the run's own and only other programs make it busy.
  speedlabs::Contention contention;
  std::vector<std::pair<std::string, ModeTrace>> modes;  ///< in the order run
  nlohmann::json accumulation;                           ///< the gradient-accumulation check, when asked for

  /// The trace of @p mode; throws RuntimeFailure when the job did not run it.
  /// @param mode "single", "naive" or "bucketed"
  const ModeTrace& mode(const std::string& mode) const;
};

/// The summary (median, quartiles, spread) of per-step times after the first 10% of the steps (at least
/// one): allocation and first-touch costs.
/// @param step_ms a mode's per-step times, in the order run
speedlabs::Summary summary_after_warmup(const std::vector<double>& step_ms);

/// Starts @p workers workers with mpirun (`--oversubscribe`, `--bind-to none`, `--allow-run-as-root` as
/// root, loopback only unless config.hostfile names machines), each running @p modes, and waits for
/// them, at most config.timeout_s. Their output is printed when they end.
/// Throws UsageError when the workers stopped at start with a usage error or mismatch (exit 2),
/// NotImplementedError when the exercise is a stub (exit 4), and RuntimeFailure, with mpirun's account
/// of which worker died, for anything else (a killed worker, a timeout).
/// @param config        the run
/// @param workers       N
/// @param modes         "single", "naive", "bucketed", run in this order
/// @param accumulation  also run the gradient-accumulation check (on rank 0)
JobResult run_job(const Config& config, int workers, const std::vector<std::string>& modes, bool accumulation);

/// Whether scaling_efficiency must hold on a run, and the conditions behind that, in words.
struct ScalingRule {
  bool must_hold = false;  ///< decided as must-hold (a failure exits 1); else reported
  std::string why;         ///< e.g. "2 one-thread workers on 2 physical cores of a quiet machine"
};

/// scaling_efficiency (N workers at least 0.8 N times as fast as one) must hold only where nothing but the
/// method can stop it: CPU workers on this one machine, each on a physical core of its own (more workers
/// than cores take turns; two on the hyperthreads of one core share its units), while the machine stayed
/// quiet (the N-worker side uses every core it is given, so another program's CPU comes out of its share).
/// Otherwise it is reported, and `why` names the condition that was not met.
/// @param config   the run (workers, device, hostfile)
/// @param topology this machine's CPUs (speedlabs::read_cpu_topology)
/// @param machine  the reading over the jobs that timed N workers against one
ScalingRule scaling_rule(const Config& config, const speedlabs::CpuTopology& topology,
                         const speedlabs::Contention& machine);

/// The whole lab: a one-worker job (the reference losses, the accumulation check, the 1-worker speed)
/// and an N-worker job (naive, then bucketed), then four rounds of short jobs (N workers bucketed and one
/// worker, the order alternating) so that scaling_efficiency is decided on per-round ratios, then the
/// observations workers_agree_at_start,
/// same_losses_as_one_worker, weights_stay_in_sync, bucketed_same_losses_as_naive, allreduce_overlap,
/// accumulation_matches_large_batch, scaling_efficiency and allreduce_bandwidth.
/// @param config the run
/// @param report receives the observations
void run(const Config& config, speedlabs::Report& report);

}  // namespace lab10
