/// @file labs/10_data_parallel/worker.h
/// @brief What every worker process runs: the same training steps on its slice of each batch.
///
/// The launcher (experiment.h) starts the workers with mpirun and passes them a JobSpec as JSON; rank 0
/// writes what the job measured (job_result_to_json) to JobSpec::out_path, and the launcher judges it.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace lab10 {

/// Deliberate faults, for the tests of the fault handling only.
struct Faults {
  int kill_rank = -1;          ///< this rank kills itself (SIGKILL) at the start of step kill_step
  int kill_step = -1;          ///< the step of kill_rank's death
  int bigger_model_rank = -1;  ///< this rank builds a model with one more layer (a shape mismatch)
  int claimed_workers = 0;     ///< >0: the workers are told to expect this many workers instead of the real count
};

/// One job of N workers: what to train, how, and where rank 0 writes the measurements.
struct JobSpec {
  std::string model = "tiny";  ///< speedlabs::gpt::GPTConfig preset
  int64_t batch = 8;           ///< global batch B: every step, rank r trains on rows [r B/N, (r+1) B/N)
  int64_t seq = 64;            ///< T
  int steps = 20;              ///< training steps per mode
  double lr = 1e-3;            ///< AdamW learning rate
  uint64_t seed = 42;          ///< initial weights (the same on every worker and in every mode)
  double bucket_mb = 25;       ///< bucket size of the bucketed mode, in MiB
  std::vector<std::string> modes;  ///< "single" (no communication), "naive", "bucketed": run in this order
  int micro_batches = 0;       ///< >0: rank 0 also checks gradient accumulation with this many micro-batches
  int expect_workers = 1;      ///< the world size the launcher started (checked against MPI's)
  std::string device = "cpu";  ///< "cpu" (gradients over MPI) or "cuda" (one GPU per worker, gradients over NCCL)
  std::string data_dir;        ///< where tiny shakespeare is
  std::string out_path;        ///< rank 0 writes the measurements here (JSON)
  int log_every = 5;           ///< rank 0 prints every this many steps
  Faults faults;               ///< none by default
};

/// The spec as JSON (the one argv entry after --worker).
/// @param spec the job
nlohmann::json to_json(const JobSpec& spec);
/// The spec back from JSON; throws speedlabs::UsageError when a field is missing or of the wrong type.
/// @param json what to_json() wrote
JobSpec job_spec_from_json(const nlohmann::json& json);

/// A worker's main(): MPI_Init, one intra-op thread, the startup agreement check, the modes of the spec,
/// and on rank 0 the measurements written to spec.out_path. On any error the worker prints it and calls
/// MPI_Abort with the lab's exit code (2 usage or mismatch, 3 runtime, 4 stub), which makes mpirun end
/// every other worker rather than leave them waiting in an all-reduce.
/// @param argc     main's argc (MPI_Init may read it)
/// @param argv     main's argv
/// @param spec_text the JobSpec as JSON text
/// @return the exit code (0 on success; errors leave through MPI_Abort)
int worker_main(int argc, char** argv, const std::string& spec_text);

}  // namespace lab10
