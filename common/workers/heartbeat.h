/// @file common/workers/heartbeat.h
/// @brief How the launcher tells a stalled worker from one waiting for it: every worker beats, the launcher
/// listens.
///
/// A worker that waits in an all-reduce for a stopped peer is still alive; a worker that is stopped
/// (SIGSTOP, a debugger, a frozen machine) is not. So each worker runs a thread that rewrites a small file
/// of its own, kHeartbeatEnv's folder/rank-R, a few times a second; the launcher reads those files while
/// it waits for mpirun and names the worker whose file stopped changing. A worker that cannot write there
/// (a remote machine, with --hostfile) never beats and is never watched: the job's timeout still holds.
#pragma once
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace speedlabs::workers {

/// The environment variable that gives the workers the heartbeat folder (mpirun passes it on).
inline constexpr const char* kHeartbeatEnv = "SPEEDLABS_HEARTBEAT_DIR";

/// A worker's heartbeat: from construction to destruction, a thread rewrites FOLDER/rank-R with this
/// process's id and a count. Nothing when the variable is unset or the file cannot be made.
class Heartbeat {
 public:
  /// @param rank this worker's rank
  explicit Heartbeat(int rank);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread beating_;
};

/// When to warn about a silent worker, and when to end its job.
struct StallLimits {
  double warn_s = 10;  ///< "worker R has made no progress for N s" once its heartbeat is this old
  double end_s = 60;   ///< then the job is ended, naming it
};

/// The launcher's side: while it lives, a thread reads one job's heartbeats about once a second. It prints
/// "worker R (pid P) has made no progress for N s" for a worker silent for limits.warn_s, and ends one
/// silent for limits.end_s (SIGKILL to that pid: mpirun then ends the job as for any worker that died),
/// keeping why for stalled(). A worker is watched from its first beat on.
class HeartbeatWatch {
 public:
  /// @param folder the job's heartbeat folder (kHeartbeatEnv)
  /// @param limits when to warn and when to give up
  HeartbeatWatch(std::filesystem::path folder, StallLimits limits);
  ~HeartbeatWatch();
  HeartbeatWatch(const HeartbeatWatch&) = delete;
  HeartbeatWatch& operator=(const HeartbeatWatch&) = delete;

  /// Why the watch ended a worker ("worker R (pid P) has made no progress for N s ..."), "" when it did not.
  std::string stalled() const;

 private:
  struct Beat {
    std::string last;  // the file's content when it last changed: "PID COUNT"
    std::chrono::steady_clock::time_point changed;
    bool warned = false;
  };
  void read_beats();
  std::string check_silences();  // the reason to end a worker, after ending it

  std::filesystem::path folder_;
  StallLimits limits_;
  std::map<int, Beat> beats_;  // by rank; the watching thread's only
  mutable std::mutex mutex_;
  std::string stalled_;  // under mutex_
  std::atomic<bool> stop_{false};
  std::thread watching_;
};

}  // namespace speedlabs::workers
