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

/// How to start one job.
struct Launch {
  int workers = 2;      ///< N, the processes mpirun starts
  std::string program;  ///< the worker program ("" = this program, /proc/self/exe), run as PROGRAM --worker SPEC
  std::string mpirun = "mpirun";  ///< the MPI launcher, looked up on PATH
  std::string hostfile;           ///< an mpirun host file ("" = this machine, every socket on the loopback interface)
  double timeout_s = 900;         ///< the job is ended, with every worker, after this long
  StallLimits stall;              ///< ... or once a worker's heartbeat stopped for this long (heartbeat.h)
  std::string who;                ///< how a worker names itself in its error line, e.g. "lab11 worker" (run_mpi_worker)
  std::string name;               ///< the job in messages, e.g. "2-worker job"
  std::string device = "cpu";     ///< "cpu" (gradients over MPI) or "cuda" (one GPU per worker, gradients over NCCL)
  FaultPlan faults;               ///< deliberate faults, for the tests of the fault handling only
};

/// What rank 0 wrote, and how busy the machine was meanwhile.
struct Launched {
  nlohmann::json result;  ///< rank 0's JSON
  /// The launcher's ContentionProbe around mpirun: the workers are its reaped descendants, so their CPU
  /// counts as the run's own and only other programs make the reading busy.
  speedlabs::Contention contention;
};

/// Rejects a job the launcher cannot start, before any worker does (speedlabs::UsageError): fewer than two
/// workers, a global batch that does not split evenly over them, a host file that is not a file, a GPU run
/// in a build without NCCL or with fewer GPUs on this machine than workers. Labs 10, 11 and 14 check this first.
/// @param workers  N
/// @param batch    B, the global batch
/// @param hostfile --hostfile ("" = this machine)
/// @param device   "cpu" or "cuda"
void validate_launch(int workers, int64_t batch, const std::string& hostfile, const std::string& device);

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
