/// @file common/workers/launcher.h
/// @brief Starting a job of MPI workers from the lab's own program, and reading what rank 0 wrote.
///
/// The worker side is run_mpi_worker (common/workers/harness.h). Labs 10, 11 and 14 start their jobs with this.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "common/contention.h"
#include "common/workers/faults.h"
#include "common/workers/heartbeat.h"

namespace speedlabs::workers {

/// What rank 0 wrote, and how busy the machine was meanwhile.
struct Launched {
  nlohmann::json result;  ///< rank 0's JSON
  /// The launcher's ContentionProbe around mpirun: the workers are its reaped descendants, so their CPU
  /// counts as the run's own and only other programs make the reading busy.
  speedlabs::Contention contention;
};

/// The launch settings of a worker lab's run, the same in labs 10, 11 and 14: each lab's Config derives from it
/// and starts its jobs with launch_of(), which passes every one of them on, so no lab leaves a limit behind.
struct LaunchConfig {
  std::string device = "cpu";     ///< "cpu" (gradients over MPI) or "cuda" (one GPU per worker, gradients over NCCL)
  std::string hostfile;           ///< an mpirun host file: workers on several machines ("" = this one, loopback)
  std::string worker_program;     ///< the program mpirun starts ("" = this program, /proc/self/exe)
  std::string mpirun = "mpirun";  ///< the MPI launcher, looked up on PATH
  double timeout_s = 900;         ///< a job that runs longer is ended, with every worker
  StallLimits stall;              ///< ... as is one with a worker whose heartbeat stopped (heartbeat.h)
  FaultPlan faults;               ///< deliberate faults, for the tests of the fault handling only
};

/// How to start one job: the run's launch settings, and this job's size and names.
struct Launch : LaunchConfig {
  int workers = 2;   ///< N, the processes mpirun starts
  std::string who;   ///< how a worker names itself in its error line, e.g. "lab11 worker" (run_mpi_worker)
  std::string name;  ///< the job in messages, e.g. "2-worker job"
};

/// Rejects a job the launcher cannot start, before any worker does (speedlabs::UsageError): fewer than two
/// workers, a host file that is not a file, a GPU run in a build without NCCL or with fewer GPUs on this machine
/// than workers. Labs 10, 11 and 14 check this first.
/// @param settings the run's launch settings
/// @param workers  N
void validate_launch(const LaunchConfig& settings, int workers);

/// Rejects a global batch that does not split evenly over data-parallel workers (labs 10 and 11; lab 14's
/// workers split the model, not the batch): speedlabs::UsageError.
/// @param batch   B, the global batch
/// @param workers N
void validate_batch_split(int64_t batch, int workers);

/// The Launch of one job of a run: every setting of @p settings, and @p workers processes.
/// @param settings the run's launch settings
/// @param workers  N
/// @param who      how a worker names itself in its error line, e.g. "lab11 worker"
/// @param name     the job in messages, e.g. "2-worker job"
Launch launch_of(const LaunchConfig& settings, int workers, std::string who, std::string name);

/// Starts `mpirun [--allow-run-as-root] --oversubscribe --bind-to none -np N (--hostfile F | loopback only)
/// PROGRAM --worker ENVELOPE`, the envelope (JSON, read by run_mpi_worker, harness.h) holding @p job, the
/// device, the world size, the faults and a file that rank 0 writes in the job's own temporary folder
/// (removed after), waits at most launch.timeout_s, watching the workers' heartbeats
/// (heartbeat.h) in that folder, and prints the job's output. Throws speedlabs::UsageError when the workers
/// stopped with a usage error (exit 2), NotImplementedError when an exercise is a stub (exit 4), and
/// RuntimeFailure, with mpirun's account of which worker died, for anything else (a killed worker, a
/// timeout, a worker whose heartbeat stopped, named).
/// @param launch how to start it
/// @param job    the lab's job, passed to every worker as JSON
Launched launch_mpi_job(const Launch& launch, const nlohmann::json& job);

}  // namespace speedlabs::workers
