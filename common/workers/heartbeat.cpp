#include "common/workers/heartbeat.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/format.h"

namespace speedlabs::workers {

namespace {

using Clock = std::chrono::steady_clock;

// A few beats a second: a second without one is already unusual, the limits are many seconds.
constexpr auto kBeatEvery = std::chrono::milliseconds(250);

// "rank-3" -> 3; -1 for any other name.
int rank_of(const std::string& name) {
  if (name.rfind("rank-", 0) != 0 || name.size() == 5) return -1;
  const std::string digits = name.substr(5);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 6) return -1;
  return std::stoi(digits);
}

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

Heartbeat::Heartbeat(int rank) {
  const char* folder = std::getenv(kHeartbeatEnv);
  if (folder == nullptr || *folder == '\0') return;
  const std::string path = std::string(folder) + "/rank-" + std::to_string(rank);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;  // not on this machine's disk (a remote worker): not watched
  beating_ = std::thread([this, fd] {
    const std::string pid = std::to_string(getpid());
    for (unsigned long count = 0; !stop_.load(); ++count) {
      char line[64];
      // Fixed width, so each beat overwrites the last whole.
      const int n = std::snprintf(line, sizeof line, "%s %020lu\n", pid.c_str(), count);
      if (::pwrite(fd, line, static_cast<size_t>(n), 0) < 0) break;
      std::this_thread::sleep_for(kBeatEvery);
    }
    ::close(fd);
  });
}

Heartbeat::~Heartbeat() {
  stop_ = true;
  if (beating_.joinable()) beating_.join();
}

HeartbeatWatch::HeartbeatWatch(std::filesystem::path folder, StallLimits limits)
    : folder_(std::move(folder)), limits_(limits) {
  watching_ = std::thread([this] {
    for (int tick = 1; !stop_.load(); ++tick) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (tick % 10 != 0) continue;  // a look a second; a stop within a tenth
      read_beats();
      std::string why = check_silences();
      if (why.empty()) continue;
      const std::lock_guard<std::mutex> lock(mutex_);
      stalled_ = std::move(why);
      return;
    }
  });
}

HeartbeatWatch::~HeartbeatWatch() {
  stop_ = true;
  watching_.join();
}

std::string HeartbeatWatch::stalled() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return stalled_;
}

void HeartbeatWatch::read_beats() {
  const auto now = Clock::now();
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder_, error)) {
    const int rank = rank_of(entry.path().filename().string());
    if (rank < 0) continue;
    const std::string content = read_all(entry.path());
    if (content.empty()) continue;
    const auto [beat, first] = beats_.try_emplace(rank, Beat{content, now, false});
    if (!first && content != beat->second.last) beat->second = Beat{content, now, false};
  }
}

std::string HeartbeatWatch::check_silences() {
  for (auto& [rank, beat] : beats_) {
    const double silent_s = std::chrono::duration<double>(Clock::now() - beat.changed).count();
    const std::string pid = beat.last.substr(0, beat.last.find(' '));
    const std::string who = "worker " + std::to_string(rank) + " (pid " + pid + ") has made no progress for " +
                            speedlabs::fixed(silent_s, 0) + " s";
    if (silent_s >= limits_.end_s) {
      const long pid_number = std::strtol(pid.c_str(), nullptr, 10);
      if (pid_number > 0) ::kill(static_cast<pid_t>(pid_number), SIGKILL);  // a stopped process dies of this too
      std::cout << "  " << who << ": ending it" << std::endl;
      return who +
             ": its heartbeat stopped (stopped by SIGSTOP or a debugger, or its machine frozen?), so it "
             "was ended (SIGKILL) and the job with it";
    }
    if (silent_s >= limits_.warn_s && !beat.warned) {
      beat.warned = true;
      std::cout << "  " << who << " (its heartbeat stopped; it is ended at " << speedlabs::fixed(limits_.end_s, 0)
                << " s)" << std::endl;
    }
  }
  return "";
}

}  // namespace speedlabs::workers
