/// @file labs/14_model_parallel/src/experiment.h
/// @brief Lab 14: the model split over N MPI workers (common/workers), two ways, each checked against one
/// worker with the whole model: tensor parallelism (every block's matrices split, an all-reduce inside each
/// block) and pipeline parallelism (the blocks split into stages, micro-batches flowing through them).
///
/// The launcher (this file) starts the jobs with workers::launch_mpi_job, reads what rank 0 measured and turns it
/// into observations; worker.h, tensor_parallel.h and pipeline.h are what runs inside each worker.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/contention.h"
#include "common/observations.h"
#include "common/workers/job_flags.h"
#include "common/workers/launcher.h"

namespace lab14 {

/// The experiment's knobs; how its jobs start (limits, the worker program) is common/workers' LaunchConfig.
struct Config : speedlabs::workers::LaunchConfig {
  int tp = 2;                     ///< N for tensor parallelism (divides the heads)
  int pp = 2;                     ///< N for the pipeline (divides the blocks)
  int micro_batches = 4;          ///< M of the pipeline's losses and timeline (the bubble also runs M = 1, 2, 4, 8)
  std::string schedule = "both";  ///< "gpipe", "1f1b" or "both"
  int64_t n_layer = 4;            ///< blocks
  int64_t n_head = 4;             ///< heads per block
  int64_t n_embd = 128;           ///< C
  int64_t batch = 8;              ///< B, the global batch
  int64_t seq = 64;               ///< T
  int steps = 6;                  ///< training steps per run
  double lr = 1e-3;               ///< AdamW learning rate
  uint64_t seed = 42;             ///< initial weights and batches
  std::string data_dir;           ///< --data-dir ("" = $SPEEDLABS_DATA_DIR, then data/ in the checkout)
  std::string plots_dir;          ///< --plots: write the pipeline's timelines (SVG) here ("" = none)
};

/// The lab's knobs, each once. --quick trains a narrower model for fewer steps.
inline speedlabs::Knobs<Config> knobs() {
  using speedlabs::at_least;
  speedlabs::Knobs<Config> knobs;
  knobs.flag("--tp", "N, tensor-parallel workers (they must divide the heads)", &Config::tp).check(at_least(2));
  knobs.flag("--pp", "N, pipeline stages, one worker each (they must divide the blocks)", &Config::pp)
      .check(at_least(2));
  knobs.flag("--micro-batches", "M, micro-batches per step of the pipeline (they must divide --batch)",
             &Config::micro_batches);
  knobs.flag("--schedule", "the pipeline's order: gpipe, 1f1b or both", &Config::schedule)
      .check(CLI::IsMember({"gpipe", "1f1b", "both"}));
  knobs.flag("--embd", "C, the width of the model", &Config::n_embd).check(at_least(int64_t{8})).quick(64);
  speedlabs::workers::batch_flag(knobs);
  speedlabs::workers::seq_flag(knobs);
  speedlabs::workers::steps_flag(knobs, "training steps per run (at least 2)").quick(4);
  knobs.flag("--plots", "write the pipeline's timelines here (lab14_timeline_SCHEDULE.svg)", &Config::plots_dir);
  knobs.data_dir_flag(&Config::data_dir);
  return knobs;
}

/// What --quick runs before any flag (the tests start from it).
inline Config quick_config() { return knobs().quick(); }

/// Rejects what cannot run, before any worker starts (speedlabs::UsageError): --tp not dividing the heads or
/// the width, --pp not dividing the blocks, M < 1 or not dividing the batch, a sequence the model cannot hold,
/// fewer than 2 steps, and more workers than this machine has logical CPUs (each worker is one thread).
/// @param config the run
void validate(const Config& config);

/// The values of M the pipeline runs: 1, 2, 4, 8 where they divide the batch, and config.micro_batches.
/// @param config the run
std::vector<int> micro_batches_of(const Config& config);

/// The schedules the pipeline runs, from --schedule.
/// @param config the run
std::vector<std::string> schedules_of(const Config& config);

/// Bytes each tensor-parallel worker sends per step, counted as a ring sends them: per block, two all-reduces of
/// B x T x C float32 in the forward and two in the backward, each 2 (N-1)/N of the buffer.
/// @param config the run (its batch, seq, n_embd, n_layer, tp)
double tp_bytes_formula(const Config& config);

/// Whether a timed claim on the pipeline's bubble can be held to its bounds on this machine: a CPU that says it
/// runs under a hypervisor (whose vCPUs may share host cores, unseen) or fewer physical cores than stages
/// cannot; then the observation is reported only.
/// @param stages N
/// @param why    receives the reason when it cannot
bool bubble_can_be_held(int stages, std::string& why);

/// The whole lab: the one-worker reference, the TP job and the PP job, then the observations
/// tp_same_losses_as_one_worker, tp_weights_per_worker, tp_bytes_sent_per_step, pp_same_losses_as_one_worker,
/// pp_bubble_share and pp_activation_peak_per_schedule, and the timelines when config.plots_dir is set.
/// @param config the run
/// @param report receives the observations
void run(const Config& config, speedlabs::Report& report);

/// The pipeline's timeline of one run's last step as SVG: a row per stage, a box per forward and backward
/// (micro-batch numbered), the gaps idle; from the measured times.
/// @param run    one run of the PP job's result ("times": per step, every stage's times)
/// @param stages N
std::string timeline_svg(const nlohmann::json& run, int stages);

}  // namespace lab14
