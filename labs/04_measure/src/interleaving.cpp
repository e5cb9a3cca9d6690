#include "interleaving.h"

#include <ATen/Parallel.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <thread>

#include "common/contention.h"
#include "exercise.h"
#include "measurement.h"

namespace lab04 {

namespace {

constexpr double kCallMs = 40;   // one timed call of the demonstration on the quiet core, at least
constexpr int kMaxMatmuls = 64;  // a slower CPU's call is longer than kCallMs, not endless

// A neighbour that starts computing in the middle of a measurement: a spinning thread pinned to the one core
// the measuring thread is pinned to, so it takes half of that core on any machine, however many cores it
// has. It lives in this process so the run decides when it starts, which makes the demonstration repeatable.
class Neighbour {
 public:
  explicit Neighbour(const cpu_set_t& core) : core_(core) {}
  void start() {
    if (thread_.joinable()) return;
    thread_ = std::thread([this] {
      pthread_setaffinity_np(pthread_self(), sizeof(core_), &core_);
      volatile double x = 0;
      while (!stop_.load(std::memory_order_relaxed)) x = x + 1;
    });
  }
  ~Neighbour() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  cpu_set_t core_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Pins the calling thread to one of the cores it may run on, and gives the old set back at the end.
class PinnedToOneCore {
 public:
  PinnedToOneCore() {
    pthread_getaffinity_np(pthread_self(), sizeof(previous_), &previous_);
    CPU_ZERO(&core_);
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &previous_)) {
        CPU_SET(c, &core_);
        break;
      }
    }
    pthread_setaffinity_np(pthread_self(), sizeof(core_), &core_);
  }
  ~PinnedToOneCore() { pthread_setaffinity_np(pthread_self(), sizeof(previous_), &previous_); }
  PinnedToOneCore(const PinnedToOneCore&) = delete;
  PinnedToOneCore& operator=(const PinnedToOneCore&) = delete;
  const cpu_set_t& core() const { return core_; }

 private:
  cpu_set_t previous_{};
  cpu_set_t core_{};
};

// The one-after-the-other comparison: its ratio and the preemptions per second before and after the load.
struct OneAfterTheOther {
  double ratio = 0;
  double preemptions_quiet = 0;
  double preemptions_loaded = 0;
};

// All of A, then the neighbour starts, then all of B.
OneAfterTheOther time_one_after_the_other(const std::function<void()>& work, const PinnedToOneCore& pinned,
                                          TorchDevice& host, const speedlabs::TimingOptions& timing) {
  OneAfterTheOther result;
  Neighbour neighbour(pinned.core());
  const speedlabs::ContentionProbe quiet;
  const double a_ms = measure(work, host, timing).median_ms;
  result.preemptions_quiet = quiet.read().preemptions_per_s;
  neighbour.start();
  const speedlabs::ContentionProbe loaded;
  const double b_ms = measure(work, host, timing).median_ms;
  result.preemptions_loaded = loaded.read().preemptions_per_s;
  result.ratio = a_ms / b_ms;
  return result;
}

}  // namespace

void observe_interleaving(const Config& config, speedlabs::Report& report) {
  // One side against itself: the true ratio is 1. The side is single-threaded 768 x 768 matmuls, as many as
  // make kCallMs on the quiet core: long against the scheduler's slices (about 3 ms), so sharing the core with
  // the neighbour halves its speed steadily. One matmul alone is 5 ms on an AVX-512 core, and a call that a
  // slice of the neighbour's either hits or misses takes 5 or 8 ms: that scatter, not the load, would decide.
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const PinnedToOneCore pinned;
  torch::manual_seed(config.seed);
  const torch::Tensor a = torch::randn({768, 768}), b = torch::randn({768, 768});
  torch::Tensor c = torch::empty({768, 768});
  TorchDevice host(c10::Device(c10::kCPU));
  const double one_matmul_ms = measure([&] { at::mm_out(c, a, b); }, host, {1, 3}).min_ms;
  // A measure() that reads no time (0, NaN: a student's first try) gets the longest call, not a division by it.
  const double needed = one_matmul_ms > 0 ? std::ceil(kCallMs / one_matmul_ms) : kMaxMatmuls;
  const int matmuls = static_cast<int>(std::clamp(needed, 1.0, double(kMaxMatmuls)));
  const auto work = [&] {
    for (int i = 0; i < matmuls; ++i) at::mm_out(c, a, b);
  };
  const speedlabs::TimingOptions timing{1, config.interleave_rounds};

  const OneAfterTheOther one_after = time_one_after_the_other(work, pinned, host, timing);
  const double sequential = one_after.ratio;
  // Interleaved: the same neighbour starts halfway through the rounds.
  PairTiming pair;
  const speedlabs::ContentionProbe probe;
  {
    Neighbour neighbour(pinned.core());
    int calls = 0;
    const int halfway = timing.warmup + timing.repeats / 2;
    pair = measure_pair(
        [&] {
          if (++calls > halfway) neighbour.start();
          work();
        },
        work, host, timing);
  }
  at::set_num_threads(threads);

  // The rule also rests on the one-after-the-other ratio, which another program can skew without bound: a busy
  // run decides nothing here.
  speedlabs::Evidence evidence(pair.ratio, probe.read(), speedlabs::LoadEffect::unknown);
  const double sequential_error = std::abs(sequential - 1.0);
  report.decide("interleaving_resists_a_changing_load",
                "a neighbour that starts computing halfway through skews a comparison timed one side after the other, "
                "while the same comparison timed in rounds side by side still finds the truth (here 1: one op "
                "against itself)",
                {{"sequential_ratio", sequential},
                 {"matmuls_per_call", matmuls},
                 {"quiet_call_ms", matmuls * one_matmul_ms},
                 {"interleaved_ratio", pair.ratio.median},
                 {"interleaved_spread", pair.ratio.spread()},
                 {"preemptions_per_s_quiet", one_after.preemptions_quiet},
                 {"preemptions_per_s_with_neighbour", one_after.preemptions_loaded}},
                "interleaved ratio within 10% of 1 per round; sequential ratio off by more than 25%", evidence,
                [&](double interleaved) { return std::abs(interleaved - 1.0) <= 0.1 && sequential_error > 0.25; });
}

}  // namespace lab04
