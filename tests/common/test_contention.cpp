#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/contention.h"
#include "tests/support/spin.h"

namespace {

using speedlabs::testing::spin_for;

// The CPU seconds the calling thread has used. The tests compare the probe's reading with it rather than with
// the wall clock: ctest runs other tests beside this one, so how much of a core a thread gets is not theirs to
// assert.
double thread_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

TEST(Contention, ReadsTheWindowItWasGiven) {
  const double thread_start = thread_cpu_s();
  const speedlabs::ContentionProbe probe;
  spin_for(0.2);
  const auto c = probe.read();
  const double spun_s = thread_cpu_s() - thread_start;
  EXPECT_GE(c.wall_s, 0.2);
  EXPECT_GE(c.cores, 1);
  // The process's CPU over the window holds at least what the spinning thread used (a margin for the few
  // microseconds between the two clocks' readings).
  EXPECT_GT(spun_s, 0.0);
  EXPECT_GT(c.process_cores * c.wall_s, 0.9 * spun_s - 1e-3) << c.to_json().dump() << " spun " << spun_s << " s";
  EXPECT_GE(c.preemptions_per_s, 0);
  const auto json = c.to_json();
  for (const char* key : {"wall_s", "process_cores", "others_cores", "preemptions_per_s", "cores", "busy"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
}

TEST(Contention, SeesACompetingThread) {
  // One spinning thread more than there are cores: the measuring thread must share its core, and the
  // kernel preempts it at every scheduler slice. A quiet window has a few preemptions a second at most.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<bool> stop{false};
  std::vector<std::thread> competitors;
  for (unsigned i = 0; i < cores; ++i) {
    competitors.emplace_back([&] {
      volatile double x = 0;
      while (!stop.load(std::memory_order_relaxed)) x = x + 1;
    });
  }
  const double thread_start = thread_cpu_s();
  const speedlabs::ContentionProbe probe;
  spin_for(0.5);
  const auto c = probe.read();
  const double measuring_s = thread_cpu_s() - thread_start;
  stop = true;
  for (auto& t : competitors) t.join();
  EXPECT_GT(c.preemptions_per_s, 20.0) << c.to_json().dump();
  // The competitors are this process's own threads: the process's CPU holds theirs beside the measuring
  // thread's (about 1 + cores times it, sharing fairly; 1.5 leaves a wide margin).
  EXPECT_GT(c.process_cores * c.wall_s, 1.5 * measuring_s)
      << c.to_json().dump() << " measuring " << measuring_s << " s";
}

TEST(Contention, BusyWhenOthersUseTheMachineOrTheWindowIsTooShortToRead) {
  speedlabs::Contention c;
  c.cores = 2;
  c.wall_s = 1.0;
  c.others_cores = 0.1;
  EXPECT_FALSE(c.busy());
  c.others_cores = 0.9;
  EXPECT_TRUE(c.busy());
  EXPECT_NE(c.why_busy().find("0.90 of 2 cores"), std::string::npos) << c.why_busy();
  c.wall_s = 0.01;  // shorter than /proc/stat's ticks can resolve: nothing says the machine was quiet
  c.others_cores = 0;
  EXPECT_TRUE(c.busy());
  EXPECT_NE(c.why_busy().find("too short"), std::string::npos) << c.why_busy();
  c.wall_s = 1.0;
  c.others_cores = -1;  // not readable on this system
  EXPECT_FALSE(c.busy());
}

TEST(Contention, AnotherProcessComputingMakesTheMachineBusy) {
  // A process spins on every core for 0.6 s: the rest of the machine used far more than half a core. Each is
  // started through a child that exits at once, so it is no longer below this process (an orphan, adopted
  // elsewhere): another program, as a second program started from a shell would be.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < cores; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (fork() == 0) spin_for(0.6);
      _exit(0);
    }
    waitpid(pid, nullptr, 0);
  }
  const speedlabs::ContentionProbe probe;
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const auto c = probe.read();
  if (c.others_cores < 0) GTEST_SKIP() << "no /proc/stat on this system";
  EXPECT_TRUE(c.busy()) << c.to_json().dump();
}

namespace {

// The CPU seconds process @p pid has used so far, from /proc/PID/stat (utime + stime), or -1.
double process_cpu_s(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line) || line.rfind(')') == std::string::npos) return -1;
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string skip;
  for (int i = 0; i < 11; ++i) fields >> skip;  // state ... cmajflt
  long long utime = 0, stime = 0;
  if (!(fields >> utime >> stime)) return -1;
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

TEST(Contention, AChildRunningInsideTheWindowIsThisProcesssOwnCpu) {
  // A worker or a peer this process started (lab 10's workers, lab 06's Python) works for the measurement:
  // its CPU is this process's, read while it runs, not another program's.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    spin_for(0.6);
    _exit(0);
  }
  const double child_start = process_cpu_s(pid);
  const speedlabs::ContentionProbe probe;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double child_used = process_cpu_s(pid) - child_start;
  const auto running = probe.read();  // the child has not been waited for yet
  waitpid(pid, nullptr, 0);
  // How much CPU the child got depends on the load beside this test: compare with what it got, to a tick.
  if (child_start < 0 || child_used < 0.05) GTEST_SKIP() << "the child got too little CPU to tell";
  EXPECT_GT(running.process_cores * running.wall_s, child_used - 0.02)
      << running.to_json().dump() << " child " << child_used << " s";
}

TEST(Contention, AChildReapedInsideTheWindowAddsOnlyTheCpuItUsedThere) {
  // The attack: a child burns CPU before the window, is left exited but unreaped (waitid with WNOWAIT), and is
  // reaped inside it. Counted by RUSAGE_CHILDREN alone, its CPU landed in the window as this process's and hid
  // another program's: the busy machine read as quiet.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    spin_for(0.5);
    _exit(0);
  }
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);
  const speedlabs::ContentionProbe probe;
  rusage used{};
  ASSERT_EQ(wait4(pid, nullptr, 0, &used), pid);  // reaped inside the window
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto c = probe.read();
  const double child_s = used.ru_utime.tv_sec + 1e-6 * used.ru_utime.tv_usec;
  if (child_s < 0.2) GTEST_SKIP() << "the child got too little CPU (" << child_s << " s) to tell";
  EXPECT_LT(c.process_cores * c.wall_s, 0.5 * child_s) << c.to_json().dump() << " child " << child_s << " s";
}

TEST(Contention, TheWorstSlowdownComesFromTheCoresTheOthersLeft) {
  speedlabs::Contention c;
  c.cores = 2;
  c.wall_s = 1.0;
  c.others_cores = 0.2;  // quiet: background ticks, which the samples' spread already carries
  EXPECT_EQ(c.worst_slowdown(), 1.0);
  c.others_cores = 1.0;  // one of two cores taken: a CPU-bound side keeps at least the other one
  EXPECT_DOUBLE_EQ(c.worst_slowdown(), 2.0);
  c.others_cores = 1.5;
  EXPECT_DOUBLE_EQ(c.worst_slowdown(), 4.0);
  c.others_cores = 2.0;  // every core taken: no bound
  EXPECT_TRUE(std::isinf(c.worst_slowdown()));
  c.others_cores = 0;
  c.wall_s = 0.01;  // unreadable: no bound either
  EXPECT_TRUE(std::isinf(c.worst_slowdown()));
}

TEST(Contention, AShortWindowIsLengthenedUntilItCanBeRead) {
  const speedlabs::ContentionProbe probe;
  const auto c = probe.read();  // at once: far shorter than the ticks of /proc/stat
  EXPECT_GE(c.wall_s, speedlabs::Contention::kShortestReadableS);
  EXPECT_EQ(c.why_busy().find("too short"), std::string::npos) << c.why_busy();
}
