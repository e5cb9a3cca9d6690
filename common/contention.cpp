#include "common/contention.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "common/format.h"
#include "common/process.h"

namespace speedlabs {

namespace {

double seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); }

// The whole machine's busy time in seconds (every state but idle and iowait), -1 where /proc is absent.
double machine_busy_s() {
  std::ifstream stat("/proc/stat");
  std::string label;
  if (!(stat >> label) || label != "cpu") return -1;
  // user nice system idle iowait irq softirq steal (guest time is already inside user)
  long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(stat >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal)) return -1;
  static const double ticks_per_s = static_cast<double>(sysconf(_SC_CLK_TCK));
  return static_cast<double>(user + nice + system + irq + softirq + steal) / ticks_per_s;
}

struct ProcStat {
  pid_t ppid = 0;
  double cpu_s = 0;  // its own CPU and that of the children it waited for (utime + stime + cutime + cstime)
};

// A process's parent and CPU from /proc/PID/stat, or nothing when it is gone or unreadable.
std::optional<ProcStat> proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  const size_t name_end = line.rfind(')');  // the command's name may hold spaces and parentheses
  if (name_end == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(name_end + 1));
  std::string state;
  long long ppid = 0, skip = 0, utime = 0, stime = 0, cutime = 0, cstime = 0;
  fields >> state >> ppid;
  for (int i = 0; i < 9; ++i) fields >> skip;  // pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
  if (!(fields >> utime >> stime >> cutime >> cstime)) return std::nullopt;
  static const double ticks_per_s = static_cast<double>(sysconf(_SC_CLK_TCK));
  return ProcStat{static_cast<pid_t>(ppid), static_cast<double>(utime + stime + cutime + cstime) / ticks_per_s};
}

// The CPU of every process below this one that is still there, exited-but-unreaped ones included (a zombie's
// /proc/PID/stat keeps its times): with the reaped children's CPU (RUSAGE_CHILDREN, read before this), the CPU
// the whole tree used so far. A child's CPU then moves from here to RUSAGE_CHILDREN when it is reaped, so
// reaping inside a window a child that ran before it adds nothing to the window (the CPU it used before the
// window was counted at its start). A process that left the tree (double-forked away) is another program.
double descendants_cpu_s() {
  std::map<pid_t, std::vector<std::pair<pid_t, double>>> children;
  for (const pid_t pid : all_processes())
    if (const auto stat = proc_stat(pid)) children[stat->ppid].push_back({pid, stat->cpu_s});
  double total = 0;
  std::vector<pid_t> below = {getpid()};
  std::set<pid_t> seen = {getpid()};
  while (!below.empty()) {
    const pid_t parent = below.back();
    below.pop_back();
    for (const auto& [pid, cpu_s] : children[parent]) {
      if (!seen.insert(pid).second) continue;
      // A descendant's cutime already holds its own reaped children: count a process's reaped CPU once.
      total += cpu_s;
      below.push_back(pid);
    }
  }
  return total;
}

}  // namespace

ContentionProbe::Counters ContentionProbe::now() {
  Counters c;
  c.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  rusage self{}, children{}, thread{};
  getrusage(RUSAGE_SELF, &self);
  // Workers and peers this process started: those it waited for, then (read after, so that one reaped in
  // between is missed rather than counted twice) those still running or not yet waited for.
  getrusage(RUSAGE_CHILDREN, &children);
  const double running_children_s = descendants_cpu_s();
  getrusage(RUSAGE_THREAD, &thread);
  c.process_cpu_s = seconds(self.ru_utime) + seconds(self.ru_stime) + seconds(children.ru_utime) +
                    seconds(children.ru_stime) + running_children_s;
  c.preemptions = thread.ru_nivcsw;
  c.machine_busy_s = machine_busy_s();
  return c;
}

ContentionProbe::ContentionProbe() : start_(now()) {}

Contention ContentionProbe::read() const {
  // A window shorter than /proc/stat's ticks can resolve is lengthened by waiting, never read as quiet: this
  // process is idle meanwhile, so what the rest of the machine used is read over a readable window.
  const double short_by = Contention::kShortestReadableS - (now().wall_s - start_.wall_s);
  if (short_by > 0) std::this_thread::sleep_for(std::chrono::duration<double>(short_by));
  const Counters end = now();
  Contention c;
  c.wall_s = end.wall_s - start_.wall_s;
  c.cores = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  if (c.wall_s <= 0) return c;
  const double process_cpu_s = end.process_cpu_s - start_.process_cpu_s;
  c.process_cores = process_cpu_s / c.wall_s;
  c.preemptions_per_s = static_cast<double>(end.preemptions - start_.preemptions) / c.wall_s;
  if (end.machine_busy_s >= 0 && start_.machine_busy_s >= 0) {
    // Clock ticks and rusage round differently: a slightly negative difference is rounding, not a reading.
    c.others_cores = std::max(0.0, (end.machine_busy_s - start_.machine_busy_s - process_cpu_s) / c.wall_s);
  }
  return c;
}

bool Contention::busy() const { return !why_busy().empty(); }

std::string Contention::why_busy() const {
  if (wall_s < kShortestReadableS) {
    return "the window (" + fixed(1e3 * wall_s, 1) + " ms) was too short to read how busy the machine was";
  }
  if (others_cores <= kBusyOthersCores) return "";
  return "other processes used " + fixed(others_cores, 2) + " of " + std::to_string(cores) + " cores meanwhile";
}

double Contention::worst_slowdown() const {
  if (!busy()) return 1;
  if (wall_s < kShortestReadableS || others_cores >= cores) return INFINITY;
  // The others' CPU comes out of the cores this thread could run on; it keeps at least the rest of them.
  return cores / (cores - others_cores);
}

nlohmann::json Contention::to_json() const {
  return {{"wall_s", wall_s},
          {"process_cores", process_cores},
          {"others_cores", others_cores},
          {"preemptions_per_s", preemptions_per_s},
          {"cores", cores},
          {"busy", busy()},
          {"worst_slowdown", std::isfinite(worst_slowdown()) ? nlohmann::json(worst_slowdown()) : nlohmann::json()}};
}

}  // namespace speedlabs
