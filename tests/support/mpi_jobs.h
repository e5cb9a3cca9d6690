/// @file tests/support/mpi_jobs.h
/// @brief The set-up that the tests of labs 10, 11 and 14 give their jobs of MPI workers.
#pragma once
#include <string>

namespace speedlabs::testing {

/// The lab's --quick configuration @p config for a test's jobs: the workers are @p program (the lab's own,
/// built beside the test and linked with the same exercise), and a job that hangs is ended after
/// @p timeout_s rather than the lab's 15 minutes.
template <class Config>
Config mpi_test_config(Config config, const std::string& program, double timeout_s = 120) {
  config.worker_program = program;
  config.timeout_s = timeout_s;
  return config;
}

/// True when @p text contains @p part (a message the test expects a piece of).
inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace speedlabs::testing
