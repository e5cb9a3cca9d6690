/// @file common/workers/job_flags.h
/// @brief What a lab program with MPI workers (labs 10, 11 and 14) does before its experiment runs: the worker
/// role, and the flags of a job of MPI workers (each a knob of the lab's table, which gives its --quick value).
#pragma once
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>

#include "common/cli.h"
#include "common/errors.h"

namespace speedlabs::workers {

/// main()'s first step: one program, two roles. Started by mpirun with `--worker SPEC`, this process is a
/// worker and returns @p worker_main's code; started by mpirun any other way, it says how to run the lab
/// (@p how_to_run) and returns the usage exit code; otherwise (std::nullopt) it is the launcher.
/// @param argc         main()'s argument count
/// @param argv         main()'s arguments
/// @param lab          the program's name in the error line, e.g. "lab10"
/// @param how_to_run   e.g. "./lab run 10 --workers N"
/// @param worker_main  the worker's main: (argc, argv, the --worker SPEC) -> exit code
template <class WorkerMain>
std::optional<int> worker_role(int argc, char** argv, const std::string& lab, const std::string& how_to_run,
                               WorkerMain worker_main) {
  if (argc == 3 && std::strcmp(argv[1], "--worker") == 0) return worker_main(argc, argv, argv[2]);
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) return std::nullopt;
  std::cerr << lab << ": error: started by mpirun, but " << lab << " starts its own workers: run " << how_to_run
            << "\n";
  return speedlabs::kExitUsage;
}

/// --workers N (at least 2 workers; the experiment's validate() says why).
template <class Config>
auto& workers_flag(speedlabs::Knobs<Config>& knobs) {
  return knobs.flag("--workers", "N, worker processes (each with one thread)", &Config::workers)
      .check(speedlabs::at_least(2));
}

/// --batch: the global batch B of a job.
template <class Config>
auto& batch_flag(speedlabs::Knobs<Config>& knobs) {
  return knobs
      .flag("--batch",
            "B, the global batch: shared by the data-parallel workers, or cut into the pipeline's micro-batches",
            &Config::batch)
      .check(speedlabs::at_least(int64_t{1}));
}

/// --seq: the sequence length T of a job.
template <class Config>
auto& seq_flag(speedlabs::Knobs<Config>& knobs) {
  return knobs.flag("--seq", "T, tokens per sequence", &Config::seq).check(speedlabs::at_least(int64_t{1}));
}

/// --steps (@p help: what a step count is per, in this lab).
template <class Config>
auto& steps_flag(speedlabs::Knobs<Config>& knobs, std::string help) {
  return knobs.flag("--steps", std::move(help), &Config::steps).check(speedlabs::at_least(1));
}

/// --hostfile FILE: the workers on several machines.
template <class Config>
auto& hostfile_flag(speedlabs::Knobs<Config>& knobs) {
  return knobs.flag("--hostfile", "an mpirun host file: run the workers on several machines", &Config::hostfile)
      .check(CLI::ExistingFile);
}

}  // namespace speedlabs::workers
