#include "common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>

#include "common/errors.h"

extern char** environ;

namespace speedlabs {

namespace {

volatile sig_atomic_t g_stop_signal = 0;
// The process group of the child now running (one at a time per process is all the labs need; the
// registry is a plain atomic so the signal handler can read it).
std::atomic<pid_t> g_child_group{0};

void on_stop_signal(int signal_number) {
  if (g_stop_signal != 0) {  // the second request: stop now
    signal(signal_number, SIG_DFL);
    raise(signal_number);
    return;
  }
  g_stop_signal = signal_number;
  const pid_t group = g_child_group.load();
  if (group > 0) kill(-group, SIGTERM);
}

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

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_read.fd, STDIN_FILENO);
  if (options.capture_output) {
    posix_spawn_file_actions_adddup2(&actions, out_write.fd, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out_write.fd, STDERR_FILENO);
  }
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attributes, 0);  // its own group, so the whole tree can be ended
  sigset_t defaults, empty;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGPIPE);
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setsigmask(&attributes, &empty);

  std::vector<std::string> args = argv;
  std::vector<std::string> env = child_environment(options);
  auto arg_pointers = pointers(args);
  auto env_pointers = pointers(env);
  pid_t pid = 0;
  const int spawn_error = posix_spawnp(&pid, args[0].c_str(), &actions, &attributes, arg_pointers.data(),
                                       env_pointers.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawn_error != 0) {
    throw RuntimeFailure("cannot start " + argv[0] + ": " + std::strerror(spawn_error));
  }
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

void install_stop_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
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

}  // namespace speedlabs
