/// @file labs/11_sharding/src/experiment.h
/// @brief Lab 11: ZeRO stages 0-3 of the tiny GPT-2 on N MPI workers (common/workers), checked against one
/// worker: the same losses, the bytes of memory per worker and the bytes sent per step, predicted and measured.
///
/// The launcher (this file) starts the jobs with workers::launch_mpi_job, reads what rank 0 measured and turns
/// it into observations; zero.h is what runs inside each worker.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/observations.h"
#include "common/workers/job_flags.h"
#include "common/workers/launcher.h"
#include "zero.h"

namespace lab11 {

/// The experiment's knobs; how its jobs start (device, host file, limits) is common/workers' LaunchConfig.
struct Config : speedlabs::workers::LaunchConfig {
  std::string model = "tiny";  ///< speedlabs::gpt::GPTConfig preset: "tiny" or "gpt2"
  int workers = 2;             ///< N
  std::string stage = "all";   ///< "0".."3" (stage 0 runs too, as the baseline) or "all"
  int64_t batch = 16;          ///< global batch B (split evenly over the workers)
  int64_t seq = 64;            ///< T
  int steps = 10;              ///< training steps per stage
  double lr = 1e-3;            ///< AdamW learning rate
  uint64_t seed = 42;          ///< initial weights and batches
  std::string data_dir;        ///< --data-dir ("" = $SPEEDLABS_DATA_DIR, then data/ in the checkout)
  std::string plots_dir;       ///< --plots: write lab11_bytes_per_worker.svg here ("" = no plot)
};

/// The lab's knobs, each once: its flags with their defaults (Config) and --quick values. --quick trains the
/// tiny model on small batches of short sequences, for a few steps per stage.
inline speedlabs::Knobs<Config> knobs() {
  namespace workers = speedlabs::workers;
  speedlabs::Knobs<Config> knobs;
  workers::workers_flag(knobs);
  knobs.flag("--stage", "ZeRO stage 0, 1, 2 or 3 (stage 0 runs too, the baseline), or all", &Config::stage)
      .check(CLI::IsMember({"0", "1", "2", "3", "all"}));
  knobs.model_flag(&Config::model);
  workers::batch_flag(knobs).quick(4);
  workers::seq_flag(knobs).quick(16);
  workers::steps_flag(knobs, "training steps per stage (at least 3)").quick(8);
  workers::hostfile_flag(knobs);
  knobs.flag("--plots", "write lab11_bytes_per_worker.svg here (gnuplot)", &Config::plots_dir);
  knobs.data_dir_flag(&Config::data_dir);
  return knobs;
}

/// What --quick runs before any flag (the tests start from it).
inline Config quick_config() { return knobs().quick(); }

/// Rejects what cannot run before a worker starts (speedlabs::UsageError): fewer than 2 workers, B not
/// divisible by N, an unknown stage, a GPU run without NCCL or with fewer GPUs than workers. More workers
/// than cores is allowed, with a warning on stderr.
/// @param config the run
void validate(const Config& config);

/// The stages a run trains, in order: stage 0 first (the baseline), then the one asked for, or 1, 2, 3.
/// @param config the run
std::vector<int> stages_of(const Config& config);

/// The bytes per worker the formulas predict, for stage @p stage.
struct Predicted {
  double weights = 0;     ///< at rest: 4 P (padded) at stages 0-2, 4 P / N at stage 3
  double gradients = 0;   ///< when the optimizer steps: 4 P at stages 0-1, 4 P / N at stages 2-3
  double optimizer = 0;   ///< AdamW's two moments: 8 P at stage 0, 8 P / N at stages 1-3
  double bytes_sent = 0;  ///< per step: 2 (N-1)/N x 4 P at stages 0 and 2, 3 (N-1)/N x 4 P at stages 1 and 3
};

/// The formulas for @p parameters parameters (padded so N divides each unit: @p padded) on @p workers workers.
/// @param stage      0-3
/// @param parameters P
/// @param padded     the flat units' elements with their padding
/// @param workers    N
Predicted predict(int stage, int64_t parameters, int64_t padded, int workers);

/// The whole lab: a one-worker job (the reference losses) and an N-worker job (the stages), then the
/// observations same_losses_as_one_worker, weights_stay_in_sync, optimizer_state_bytes_per_worker,
/// gradient_bytes_per_worker, parameter_bytes_at_rest_per_worker, peak_bytes_per_worker, bytes_sent_per_step
/// and step_time_per_stage, and the plot when config.plots_dir is set.
/// @param config the run
/// @param report receives the observations
void run(const Config& config, speedlabs::Report& report);

}  // namespace lab11
