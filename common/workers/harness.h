/// @file common/workers/harness.h
/// @brief What every worker process of a lab with workers (labs 10, 11 and 14) runs around its lab's job: MPI,
/// the heartbeat, the engine its gradients travel on, the clock of a training step, the start-up checks,
/// rank 0's result written for the launcher, and the deliberate faults of the tests.
///
/// The launcher (launcher.h) starts the workers as `PROGRAM --worker ENVELOPE`: the envelope (JSON) holds the
/// lab's job, the device, the world size the launcher started, the faults and where rank 0 writes. The lab's
/// program hands it to run_mpi_worker() with the lab's job function, which sees only its own job and an Engine.
#pragma once
#include <torch/types.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/errors.h"
#include "common/gpt.h"
#include "common/workers/communicator.h"
#include "common/workers/faults.h"
#include "common/workers/mpi_communicator.h"

namespace speedlabs::workers {

/// A training step's clock (Engine::start_step() to stop()).
class StepClock {
 public:
  /// What stop() read.
  struct Time {
    double ms = 0;       ///< the step's wall time, the device's queued work included
    double comm_ms = 0;  ///< of which inside the MPI communicator's collectives (not hidden behind other work)
  };
  /// Starts the clock and the count of MPI time.
  /// @param control the job's MPI communicator
  /// @param device  the worker's device (a GPU's queued work is waited for before the clock is read)
  StepClock(MpiCommunicator& control, const torch::Device& device);
  /// Waits for the device's queued work, then reads the step's time and its MPI time.
  Time stop() const;

 private:
  MpiCommunicator& control_;
  torch::Device device_;
  std::chrono::steady_clock::time_point start_;
};

/// Where a worker trains and how its gradients travel: this CPU and MPI, or its own GPU and NCCL. The harness
/// makes it from the envelope's device; the lab's job trains with it.
struct Engine {
  MpiCommunicator& control;  ///< the job's MPI communicator: the start, losses, checksums (the control plane)
  Communicator& gradients;   ///< the gradients' communicator: `control` itself on a CPU, NCCL between GPUs
  torch::Device device;      ///< this worker's CPU, or its own GPU
  FaultPlan faults;          ///< the tests' faults (none otherwise), planted by the two calls below

  /// The model this worker builds from @p preset (speedlabs::gpt::GPTConfig::by_name).
  /// @param preset e.g. "tiny"
  gpt::GPTConfig model_config(const std::string& preset) const;
  /// A training step begins: its clock starts.
  /// @param step the step's number, from 0
  StepClock start_step(int step) const;
};

/// A lab's job in a worker: its own part of the envelope (what the launcher was given) and the engine;
/// returns what it measured (rank 0's result is written for the launcher).
using Job = std::function<nlohmann::json(const nlohmann::json& job, Engine& engine)>;

/// A worker's main(): MPI_Init, one intra-op thread, a heartbeat for the launcher (heartbeat.h), the world-size
/// check, the engine of the envelope's device, then @p job; rank 0 writes its result where the launcher reads
/// it. On an error, the line "<who> <rank>: <why>" on stderr and MPI_Abort with the lab's exit code (2 usage or
/// mismatch, 3 runtime, 4 stub), so that mpirun ends every other worker at once.
/// @param argc          main's argc (MPI_Init may read it)
/// @param argv          main's argv
/// @param who           how the error line names a worker, e.g. "lab10 worker" (the launcher looks for it)
/// @param envelope_text the argv entry after --worker (launch_mpi_job wrote it)
/// @param job           the lab's job
/// @return 0 on success (errors leave through MPI_Abort)
int run_mpi_worker(int argc, char** argv, const std::string& who, const std::string& envelope_text, const Job& job);

/// The lab's job back from its JSON (@p Spec has nlohmann's from_json); speedlabs::UsageError when a field is
/// missing or of the wrong type.
/// @param job the envelope's job, as the lab's to_json() wrote it
template <class Spec>
Spec job_from_json(const nlohmann::json& job) {
  try {
    return job.get<Spec>();
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(std::string("a worker's job description is not valid: ") + e.what());
  }
}

/// The rows of a global batch that each worker trains on; speedlabs::UsageError when they do not split evenly.
/// @param batch   B, the global batch
/// @param workers N
int64_t rows_per_worker(int64_t batch, int workers);

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

/// Before step 0: every worker must build the same model and split the same batch, or the collectives would
/// pair buffers of different sizes. Throws speedlabs::UsageError naming the rank that differs. (The world
/// size is checked by run_mpi_worker before the job starts.)
/// @param batch B, the global batch (compared too)
/// @param seq   T (compared too)
/// @param model this worker's model
/// @param comm  the job's MPI communicator
void check_workers_agree(int64_t batch, int64_t seq, gpt::GPT& model, MpiCommunicator& comm);

}  // namespace speedlabs::workers
