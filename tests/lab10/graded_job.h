/// @file tests/lab10/graded_job.h
/// @brief The graded jobs of lab 10: 2 MPI workers training the tiny model at B=4, T=16, shared by the graded
/// tests (graded.cpp) and the outside timing of the bucketed step (checked.cpp).
#pragma once
#include "common/build_paths.h"
#include "experiment.h"
#include "tests/support/mpi_jobs.h"

namespace speedlabs::testing {

/// The tiny model at B=4, T=16, where a step is short and the all-reduce a large part of it (the speed grade's
/// rule in docs/grading.md is stated for this size); the workers are this build's lab10.
inline lab10::Config graded_job_config() {
  lab10::Config config = mpi_test_config(lab10::quick_config(), program_path("lab10"));
  config.batch = 4;
  config.seq = 16;
  return config;
}

}  // namespace speedlabs::testing
