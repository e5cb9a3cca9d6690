/// @file errors.h
/// @brief The error kinds a lab can end with, each mapped to an exit code by run_lab().
#pragma once
#include <stdexcept>
#include <string>

namespace speedlabs {

/// Exit codes shared by every lab program.
enum ExitCode : int {
  kExitOk = 0,                 ///< every must-hold observation holds
  kExitObservationFailed = 1,  ///< at least one must-hold observation fails
  kExitUsage = 2,              ///< bad flag or value, unavailable device, unwritable output
  kExitRuntime = 3,            ///< the experiment could not run: missing data, NaN loss, out of memory
  kExitNotImplemented = 4,     ///< a student's exercise is still a stub
  kExitUndecided = 5,          ///< no must-hold observation fails, but one could not be decided (busy machine)
  kExitInterrupted = 130       ///< stopped by Ctrl-C or SIGTERM (128 + SIGINT, as a shell reports a Ctrl-C)
};

/// Bad input from the user: unknown value, impossible size, a device that is not there. Exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The experiment cannot go on (missing data, NaN loss, out of memory). Exit 3.
struct RuntimeFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Thrown by a student stub that has not been written yet. Exit 4.
struct NotImplementedError : std::logic_error {
  using std::logic_error::logic_error;
};

/// Throws NotImplementedError with the message every stub shares.
/// @param lab     the lab number as written in the TODO, e.g. "01"
/// @param folder  the lab's folder, e.g. "01_vectorize"
/// @param what    the function still to write
[[noreturn]] void not_implemented(const std::string& lab, const std::string& folder, const std::string& what);

}  // namespace speedlabs
