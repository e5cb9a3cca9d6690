#include "common/contention.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <thread>

#include "common/format.h"

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

}  // namespace

ContentionProbe::Counters ContentionProbe::now() {
  Counters c;
  c.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  rusage self{}, children{}, thread{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);  // workers and peers this process started and waited for
  getrusage(RUSAGE_THREAD, &thread);
  c.process_cpu_s =
      seconds(self.ru_utime) + seconds(self.ru_stime) + seconds(children.ru_utime) + seconds(children.ru_stime);
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
