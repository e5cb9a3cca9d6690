#include "common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <sstream>

#include "common/errors.h"

extern char** environ;

namespace speedlabs {

namespace {

volatile sig_atomic_t g_stop_signal = 0;
// The process group of the child now running (one at a time per process is all the labs need; the
// registry is a plain atomic so the signal handler can read it).
std::atomic<pid_t> g_child_group{0};

// Set once install_stop_handlers() ran: a lab that stops between its steps.
std::atomic<bool> g_graceful{false};

void on_stop_signal(int signal_number) {
  if (g_stop_signal != 0) _exit(kExitInterrupted);  // the second request: stop now, with the one code
  g_stop_signal = signal_number;
  const pid_t group = g_child_group.load();
  if (group > 0) kill(-group, SIGTERM);
}

// A lab with no step to stop between ends at once, with the same code as one that stops between two steps.
void exit_interrupted(int) { _exit(kExitInterrupted); }

// Closes a file descriptor once.
struct Fd {
  int fd = -1;
  ~Fd() { close_now(); }
  void close_now() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

std::vector<std::string> child_environment(const ProcessOptions& options) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    bool replaced = false;
    for (const auto& [name, value] : options.env) replaced |= entry.rfind(name + "=", 0) == 0;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [name, value] : options.env) env.push_back(name + "=" + value);
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (auto& s : strings) result.push_back(s.data());
  result.push_back(nullptr);
  return result;
}

// Starts the child in a process group of its own (so the whole tree can be ended), with default signal
// dispositions and mask, its input from @p in_fd and, when @p out_fd >= 0, its stdout and stderr to it.
// It gets SIGKILL when this process dies, even by SIGKILL: posix_spawn cannot ask for that, hence fork
// and exec, with only async-signal-safe calls between them. Throws RuntimeFailure when exec fails.
pid_t start_child(std::vector<char*>& argv, std::vector<char*>& env, int in_fd, int out_fd) {
  int exec_error_pipe[2];  // the child writes exec's errno here; a successful exec closes it
  if (pipe2(exec_error_pipe, O_CLOEXEC) != 0) {
    throw RuntimeFailure(std::string("cannot create a pipe: ") + std::strerror(errno));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before the line above
    for (int signal_number : {SIGINT, SIGTERM, SIGPIPE}) signal(signal_number, SIG_DFL);
    sigset_t empty;
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, nullptr);
    dup2(in_fd, STDIN_FILENO);
    if (out_fd >= 0) {
      dup2(out_fd, STDOUT_FILENO);
      dup2(out_fd, STDERR_FILENO);
    }
    execvpe(argv[0], argv.data(), env.data());
    const int error = errno;
    (void)!::write(exec_error_pipe[1], &error, sizeof error);
    _exit(127);
  }
  const int fork_error = errno;
  ::close(exec_error_pipe[1]);
  if (pid < 0) {
    ::close(exec_error_pipe[0]);
    throw RuntimeFailure(std::string("cannot start ") + argv[0] + ": " + std::strerror(fork_error));
  }
  setpgid(pid, pid);  // as the child does: whichever runs first, a signal to the group reaches it
  int exec_error = 0;
  ssize_t n = 0;
  do {
    n = ::read(exec_error_pipe[0], &exec_error, sizeof exec_error);
  } while (n < 0 && errno == EINTR);
  ::close(exec_error_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof exec_error)) {
    waitpid(pid, nullptr, 0);
    throw RuntimeFailure(std::string("cannot start ") + argv[0] + ": " + std::strerror(exec_error));
  }
  return pid;
}

// Ends the child's group: SIGTERM, a moment to exit, then SIGKILL; returns its wait status.
int end_group(pid_t pid) {
  kill(-pid, SIGTERM);
  int status = 0;
  for (int i = 0; i < 50; ++i) {  // up to 2.5 s for a clean exit
    if (waitpid(pid, &status, WNOHANG) == pid) {
      kill(-pid, SIGKILL);  // whatever of the group is left
      return status;
    }
    usleep(50'000);
  }
  kill(-pid, SIGKILL);
  waitpid(pid, &status, 0);
  return status;
}

}  // namespace

std::string ProcessResult::describe() const {
  if (interrupted) return "interrupted";
  if (timed_out) return "timed out after the limit";
  if (signal != 0) return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "exit " + std::to_string(exit_code);
}

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty()) throw RuntimeFailure("run_process: no program given");
  Fd out_read, out_write, in_read, in_write;
  int out_pipe[2], in_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(in_pipe, O_CLOEXEC) != 0) {
    throw RuntimeFailure(std::string("cannot create a pipe: ") + std::strerror(errno));
  }
  out_read.fd = out_pipe[0];
  out_write.fd = out_pipe[1];
  in_read.fd = in_pipe[0];
  in_write.fd = in_pipe[1];

  std::vector<std::string> args = argv;
  std::vector<std::string> env = child_environment(options);
  auto arg_pointers = pointers(args);
  auto env_pointers = pointers(env);
  const pid_t pid = start_child(arg_pointers, env_pointers, in_read.fd, options.capture_output ? out_write.fd : -1);
  g_child_group.store(pid);
  in_read.close_now();
  out_write.close_now();

  ProcessResult result;
  // The input first (the children we run read it whole before they write much), then the output.
  size_t written = 0;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const sighandler_t previous_pipe = signal(SIGPIPE, SIG_IGN);  // a child that exits early must not kill us
  while (written < options.input.size()) {
    const ssize_t n = ::write(in_write.fd, options.input.data() + written, options.input.size() - written);
    if (n <= 0) break;  // the child closed its input: it will say why in its output
    written += static_cast<size_t>(n);
  }
  in_write.close_now();
  signal(SIGPIPE, previous_pipe);

  int status = 0;
  bool reaped = false;
  char buffer[65536];
  while (!reaped) {
    if (g_stop_signal != 0) {
      result.interrupted = true;
      status = end_group(pid);
      reaped = true;
      break;
    }
    if (options.timeout_s > 0 && elapsed_s() > options.timeout_s) {
      result.timed_out = true;
      status = end_group(pid);
      reaped = true;
      break;
    }
    if (out_read.fd >= 0) {
      pollfd waiting{out_read.fd, POLLIN, 0};
      if (poll(&waiting, 1, 100) > 0) {
        const ssize_t n = ::read(out_read.fd, buffer, sizeof buffer);
        if (n > 0) {
          result.output.append(buffer, static_cast<size_t>(n));
          continue;
        }
        if (n == 0 || (n < 0 && errno != EINTR)) out_read.close_now();
      }
    } else {
      usleep(20'000);
    }
    if (out_read.fd < 0 || !options.capture_output) reaped = waitpid(pid, &status, WNOHANG) == pid;
  }
  kill(-pid, SIGKILL);  // grandchildren the child left behind in its group
  g_child_group.store(0);
  if (WIFEXITED(status) && !result.timed_out && !result.interrupted) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

LineChild::LineChild(const std::vector<std::string>& argv,
                     const std::vector<std::pair<std::string, std::string>>& env) {
  if (argv.empty()) throw RuntimeFailure("LineChild: no program given");
  int out_pipe[2], in_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0)
    throw RuntimeFailure(std::string("cannot create a pipe: ") + std::strerror(errno));
  if (pipe2(in_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw RuntimeFailure(std::string("cannot create a pipe: ") + std::strerror(errno));
  }
  Fd out_write{out_pipe[1]}, in_read{in_pipe[0]};
  from_child_ = out_pipe[0];
  to_child_ = in_pipe[1];
  ProcessOptions options;
  options.env = env;
  std::vector<std::string> args = argv;
  std::vector<std::string> environment = child_environment(options);
  auto arg_pointers = pointers(args);
  auto env_pointers = pointers(environment);
  try {
    pid_ = start_child(arg_pointers, env_pointers, in_read.fd, out_write.fd);
  } catch (...) {
    ::close(from_child_);
    ::close(to_child_);
    throw;
  }
}

LineChild::~LineChild() {
  ::close(to_child_);  // end of input: the child exits on its own
  int status = 0;
  for (int i = 0; i < 50 && pid_ > 0; ++i) {  // up to 2.5 s
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      kill(-pid_, SIGKILL);  // whatever it left in its group
      pid_ = -1;
    } else {
      usleep(50'000);
    }
  }
  if (pid_ > 0) end_group(pid_);
  ::close(from_child_);
}

void LineChild::send(const std::string& line) {
  const std::string bytes = line + "\n";
  const sighandler_t previous_pipe = signal(SIGPIPE, SIG_IGN);  // a child that exited must not end us
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(to_child_, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  signal(SIGPIPE, previous_pipe);
  if (written < bytes.size()) throw RuntimeFailure("the child closed its input" + chatter());
}

std::string LineChild::answer(const std::string& prefix, double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  char buffer[4096];
  for (;;) {
    for (size_t end; (end = pending_.find('\n')) != std::string::npos;) {
      std::string line = pending_.substr(0, end);
      pending_.erase(0, end + 1);
      if (line.rfind(prefix, 0) == 0) return line;
      chatter_.push_back(std::move(line));
      if (chatter_.size() > 8) chatter_.erase(chatter_.begin());
    }
    if (g_stop_signal != 0) throw RuntimeFailure("interrupted while waiting for a child's answer");
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s)
      throw RuntimeFailure("no answer from the child in " + std::to_string(timeout_s) + " s" + chatter());
    pollfd waiting{from_child_, POLLIN, 0};
    if (poll(&waiting, 1, 100) <= 0) continue;
    const ssize_t n = ::read(from_child_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw RuntimeFailure("the child exited" + chatter());
    pending_.append(buffer, static_cast<size_t>(n));
  }
}

std::string LineChild::chatter() const {
  std::string text;
  for (const auto& line : chatter_) text += "\n    " + line;
  return text.empty() ? "" : ", its last lines:" + text;
}

void require_program(const std::string& program, const std::string& flag) {
  const auto runnable = [](const std::string& path) {
    struct stat info {};
    return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(path.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    if (runnable(program)) return;
    throw UsageError(flag + " " + program + ": no such program, or not executable");
  }
  const char* path = std::getenv("PATH");
  std::stringstream folders(path != nullptr ? path : "");
  std::string folder;
  while (std::getline(folders, folder, ':')) {
    if (runnable((folder.empty() ? "." : folder) + "/" + program)) return;
  }
  throw UsageError(flag + " " + program + ": not found on PATH");
}

void exit_on_stop_signals() {
  if (g_graceful.load()) return;
  struct sigaction action {};
  action.sa_handler = exit_interrupted;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

void install_stop_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_graceful = true;
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
  });
}

bool stop_requested() { return g_stop_signal != 0; }

void stop_if_asked(const std::string& where) {
  if (stop_requested()) throw RuntimeFailure("interrupted " + where);
}

int stop_signal() { return g_stop_signal; }

std::vector<pid_t> all_processes() {
  std::vector<pid_t> pids;
  std::error_code error;
  for (std::filesystem::directory_iterator it("/proc", error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos)
      pids.push_back(static_cast<pid_t>(std::strtol(name.c_str(), nullptr, 10)));
  }
  return pids;
}

}  // namespace speedlabs
