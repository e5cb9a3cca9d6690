/// @file process.h
/// @brief Starting another program (Python, mpirun, gnuplot) safely: from an argv vector, never a shell.
///
/// A path or an argument is passed to the child as one argv entry, so no quote in it can become a
/// command. The child runs in a process group of its own; the group is ended (SIGTERM, then SIGKILL)
/// when its time runs out, when the caller is interrupted (Ctrl-C, SIGTERM) and on every way out of
/// run_process, and the child gets SIGKILL when the lab dies (even by SIGKILL), so no child outlives
/// the lab that started it.
#pragma once
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace speedlabs {

/// How to run a child process.
struct ProcessOptions {
  std::vector<std::pair<std::string, std::string>> env;  ///< variables set (or replaced) for the child
  std::string input;           ///< written to the child's standard input, which is then closed
  double timeout_s = 0.0;      ///< end the child after this many seconds (0: no limit)
  bool capture_output = true;  ///< collect stdout and stderr together; false: they go to ours
};

/// What a child process did.
struct ProcessResult {
  int exit_code = -1;        ///< its exit status, or -1 when a signal ended it
  int signal = 0;            ///< the signal that ended it (0: it exited)
  bool timed_out = false;    ///< we ended it because ProcessOptions::timeout_s ran out
  bool interrupted = false;  ///< we ended it because this process was asked to stop (SIGINT/SIGTERM)
  std::string output;        ///< stdout and stderr, interleaved as written (when captured)

  /// True when it exited with status 0.
  bool ok() const { return exit_code == 0; }
  /// "exit 3", "killed by signal 9", "timed out after the limit" or "interrupted": for messages.
  std::string describe() const;
};

/// Runs @p argv (argv[0] is looked up on PATH when it has no '/') and waits for it.
/// Throws RuntimeFailure when the program cannot be started (not found, not executable).
/// @param argv     the program and its arguments, each passed unchanged
/// @param options  environment, input, time limit, output capture
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

/// A child program spoken to a line at a time: lines go to its standard input, its answers are read from its
/// output (stdout and stderr together), one line each. Started like run_process's children: from an argv
/// vector, in a process group of its own, killed when this process dies; the destructor closes its input,
/// gives it a moment to exit and then ends its group, so it never outlives its owner.
class LineChild {
 public:
  /// Starts @p argv (RuntimeFailure when it cannot be started).
  /// @param argv the program and its arguments, each passed unchanged
  /// @param env  variables set (or replaced) for the child
  explicit LineChild(const std::vector<std::string>& argv,
                     const std::vector<std::pair<std::string, std::string>>& env = {});
  ~LineChild();
  LineChild(const LineChild&) = delete;
  LineChild& operator=(const LineChild&) = delete;

  /// Writes @p line and a newline to the child's input; RuntimeFailure when the child has closed it.
  void send(const std::string& line);

  /// The next line of the child's output that starts with @p prefix; the lines before it are kept (chatter()).
  /// RuntimeFailure, with the child's last lines, when it exits first, when @p timeout_s passes, or when this
  /// process is asked to stop.
  std::string answer(const std::string& prefix, double timeout_s);

  /// The child's last lines that were not answers (a traceback, a warning), for messages.
  std::string chatter() const;

 private:
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string pending_;               // output read but not yet split into lines
  std::vector<std::string> chatter_;  // the last lines that were not answers
};

/// Throws UsageError, naming @p flag, unless @p program can be run: an executable file (a path with a
/// '/'), or one found on PATH. A lab checks its --python this way before any work.
/// @param program  e.g. "/usr/bin/python3" or "python3"
/// @param flag     the flag that gave it, e.g. "--python"
void require_program(const std::string& program, const std::string& flag);

/// Every process /proc shows (this one included), as it stands now: what a search for processes by their
/// /proc/PID files (stat, environ, cmdline) walks. A process may end before its files are read.
std::vector<pid_t> all_processes();

/// Makes SIGINT and SIGTERM end the process at once with kExitInterrupted (130), unless install_stop_handlers()
/// already made them a request to stop: run_lab calls it, so every lab's interrupted run exits 130.
void exit_on_stop_signals();

/// Turns SIGINT and SIGTERM into a request to stop (see stop_requested()) instead of ending the process
/// at once: the children of run_process are ended and waited for, the lab stops between two steps,
/// removes its temporary files and says what was interrupted (run_lab: exit 130). A second Ctrl-C ends the process
/// at once, exit 130 too.
/// Idempotent; the handlers stay installed for the life of the process.
void install_stop_handlers();

/// True once SIGINT or SIGTERM arrived after install_stop_handlers().
bool stop_requested();

/// Throws RuntimeFailure("interrupted " + @p where) when stop_requested(): a long run calls it between
/// two steps, so it stops there, its files whole, and says where it was.
/// @param where  e.g. "at step 12 of mode bf16"
void stop_if_asked(const std::string& where);

/// The signal that asked to stop (SIGINT or SIGTERM), 0 when none did.
int stop_signal();

}  // namespace speedlabs
