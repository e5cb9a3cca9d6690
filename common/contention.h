/// @file contention.h
/// @brief How busy the machine was while something was measured: a reading taken over a window.
///
/// A timing is only as good as the machine it ran on. Over a measurement window this reads three things
/// the kernel already counts: the CPU this process and every process below it used (the children it waited
/// for, and those still running or not yet waited for, read from /proc: a child's CPU counts in the window
/// it was used in, never in the window it is reaped in), the CPU the
/// whole machine used (/proc/stat), and how often the measuring thread was preempted (involuntary context
/// switches, getrusage). Another program busy on the machine shows as CPU used by others, and makes the
/// machine busy: a verdict timed then is refused. A competitor for the measuring thread's core, inside
/// the process or outside it, shows as preemptions; those are recorded, not judged, because some labs
/// compete with themselves on purpose (a loader thread beside the training step).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace speedlabs {

/// What the machine did during one measurement window.
struct Contention {
  double wall_s = 0;             ///< the window's length
  double process_cores = 0;      ///< cores' worth of CPU this process and the processes below it used
  double others_cores = -1;      ///< cores' worth of CPU the rest of the machine used; -1: not readable here
  double preemptions_per_s = 0;  ///< involuntary context switches of the measuring thread, per second
  int cores = 0;                 ///< online cores

  /// Other processes may use up to this many cores' worth of CPU before the machine counts as busy: a
  /// background daemon's tick stays well under it, a second program computing does not.
  static constexpr double kBusyOthersCores = 0.5;
  /// Windows shorter than this are too short for /proc/stat's 10 ms ticks to say anything: a probe lengthens
  /// them, and a reading of one made otherwise counts as busy.
  static constexpr double kShortestReadableS = 0.05;

  /// True when other processes used the CPU meanwhile, or the window was too short to read whether they did.
  bool busy() const;
  /// How many times slower the other programs can have made one CPU-bound thread of this process: 1 on a
  /// quiet machine, cores / (cores - others) on a busy one (the others' CPU taken from the cores this
  /// thread could run on), infinite when they used every core or the window could not be read.
  double worst_slowdown() const;
  /// Why the machine counts as busy, in words ("" when it does not).
  std::string why_busy() const;
  /// {"wall_s", "process_cores", "others_cores", "preemptions_per_s", "cores", "busy", "worst_slowdown"}
  /// (worst_slowdown null when unbounded)
  nlohmann::json to_json() const;
};

/// Starts a window when constructed; read() closes it (and may be called again for a longer window).
class ContentionProbe {
 public:
  ContentionProbe();
  /// The reading from construction until now, or until Contention::kShortestReadableS after construction when
  /// that is later: a shorter window is lengthened by waiting (this process idle meanwhile), so the others' CPU
  /// is always read over a window long enough to say something.
  Contention read() const;

 private:
  struct Counters {
    double wall_s = 0, process_cpu_s = 0, machine_busy_s = -1;
    long preemptions = 0;
  };
  static Counters now();
  Counters start_;
};

}  // namespace speedlabs
