/// @file labs/10_data_parallel/worker.h
/// @brief What every worker process runs: the same training steps on its slice of each batch.
///
/// The launcher (experiment.h) starts the workers with mpirun and passes them a JobSpec as JSON; rank 0
/// writes what the job measured (job_result_to_json) to JobSpec::out_path, and the launcher judges it.
#pragma once
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/gpt.h"

namespace lab10 {

class MpiCommunicator;

/// Deliberate faults, for the tests of the fault handling only.
struct Faults {
  int kill_rank = -1;          ///< this rank kills itself (SIGKILL) at the start of step kill_step
  int kill_step = -1;          ///< the step of kill_rank's death
  int stop_rank = -1;          ///< this rank stops itself (SIGSTOP) at the start of step stop_step
  int stop_step = -1;          ///< the step at which stop_rank stops
  int bigger_model_rank = -1;  ///< this rank builds a model with one more layer (a shape mismatch)
  int claimed_workers = 0;     ///< >0: the workers are told to expect this many workers instead of the real count
};

/// One job of N workers: what to train, how, and where rank 0 writes the measurements.
struct JobSpec {
  std::string model = "tiny";      ///< speedlabs::gpt::GPTConfig preset
  int64_t batch = 8;               ///< global batch B: every step, rank r trains on rows [r B/N, (r+1) B/N)
  int64_t seq = 64;                ///< T
  int steps = 20;                  ///< training steps per mode
  double lr = 1e-3;                ///< AdamW learning rate
  uint64_t seed = 42;              ///< initial weights (the same on every worker and in every mode)
  double bucket_mb = 25;           ///< bucket size of the bucketed mode, in MiB
  std::vector<std::string> modes;  ///< "single" (no communication), "naive", "bucketed": run in this order
  int micro_batches = 0;           ///< >0: rank 0 also checks gradient accumulation with this many micro-batches
  int expect_workers = 1;          ///< the world size the launcher started (checked against MPI's)
  std::string device = "cpu";      ///< "cpu" (gradients over MPI) or "cuda" (one GPU per worker, gradients over NCCL)
  std::string data_dir;            ///< where tiny shakespeare is
  std::string out_path;            ///< rank 0 writes the measurements here (JSON)
  int log_every = 5;               ///< rank 0 prints every this many steps
  Faults faults;                   ///< none by default
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

/// What every worker of the MPI engine does around its job (lab 10's and lab 11's): MPI_Init, one intra-op
/// thread, a heartbeat for the launcher (heartbeat.h), then @p job; on an error, the line "<who> <rank>: <why>" on
/// stderr and MPI_Abort with the lab's exit code (2 usage or mismatch, 3 runtime, 4 stub), so that mpirun ends every
/// other worker at once.
/// @param argc main's argc (MPI_Init may read it)
/// @param argv main's argv
/// @param who  how the error line names a worker, e.g. "lab10 worker" (the launcher looks for it)
/// @param job  the worker's work
/// @return 0 on success (errors leave through MPI_Abort)
int run_mpi_worker(int argc, char** argv, const std::string& who, const std::function<void(MpiCommunicator&)>& job);

/// Milliseconds since @p start (steady clock).
/// @param start when the timed work began
double ms_since(std::chrono::steady_clock::time_point start);

/// Waits for the work queued on @p device (a GPU's stream) before a clock is read; nothing on the CPU.
/// @param device the worker's device
void finish_queued_work(const torch::Device& device);

/// A fingerprint of the exact bits of @p tensors (float32): the bit patterns as integers, weighted by
/// position within a tensor and mixed across tensors, so one differing bit anywhere changes it.
/// @param tensors the weights
uint64_t weights_checksum(const std::vector<torch::Tensor>& tensors);

/// Before step 0: every worker must see the world size the launcher started and build the same model, or
/// the collectives would pair buffers of different sizes (or wait for a worker that never comes). Throws
/// speedlabs::UsageError naming the rank that differs.
/// @param expect_workers the world size the launcher started
/// @param batch          B, the global batch (compared too)
/// @param seq            T (compared too)
/// @param model          this worker's model
/// @param comm           the job's MPI communicator
void check_workers_agree(int expect_workers, int64_t batch, int64_t seq, speedlabs::gpt::GPT& model,
                         MpiCommunicator& comm);

}  // namespace lab10
