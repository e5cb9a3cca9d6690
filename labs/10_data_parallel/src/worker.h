/// @file labs/10_data_parallel/src/worker.h
/// @brief What every worker process runs: the same training steps on its slice of each batch.
///
/// The launcher (experiment.h) starts the workers with launch_mpi_job (common/workers/launcher.h) and passes
/// them a JobSpec as JSON; each runs it in the workers' harness (common/workers/harness.h), and rank 0's
/// measurements go back to the launcher, which judges them.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace lab10 {

/// One job of N workers: what to train, and how. Every field is set by run_job (experiment.cpp) from the lab's
/// Config, whose defaults (experiment.h) are the only ones: none is written here.
struct JobSpec {
  std::string model;               ///< speedlabs::gpt::GPTConfig preset
  int64_t batch = 0;               ///< global batch B: every step, rank r trains on rows [r B/N, (r+1) B/N)
  int64_t seq = 0;                 ///< T
  int steps = 0;                   ///< training steps per mode
  double lr = 0;                   ///< AdamW learning rate
  uint64_t seed = 0;               ///< initial weights (the same on every worker and in every mode)
  double bucket_mb = 0;            ///< bucket size of the bucketed mode, in MiB
  std::vector<std::string> modes;  ///< "single" (no communication), "naive", "bucketed": run in this order
  int micro_batches = 0;           ///< >0: rank 0 also checks gradient accumulation with this many micro-batches
  std::string data_dir;            ///< where tiny shakespeare is
  int log_every = 5;               ///< rank 0 prints every this many steps (not a knob of the lab)
};

/// The spec as JSON (the job in the launcher's envelope).
/// @param spec the job
nlohmann::json to_json(const JobSpec& spec);

/// A worker's main(): the workers' harness (run_mpi_worker) around the modes of the spec; rank 0's result
/// holds what each mode measured, step by step, and the all-reduce benchmark.
/// @param argc          main's argc (MPI_Init may read it)
/// @param argv          main's argv
/// @param envelope_text the argv entry after --worker (the JobSpec inside the launcher's envelope)
/// @return the exit code (0 on success; errors leave through MPI_Abort)
int worker_main(int argc, char** argv, const std::string& envelope_text);

}  // namespace lab10
