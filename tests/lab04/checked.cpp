// Lab 04, checked outside the student's process (tests/support/checked.h): measure() and measure_pair() on
// the queued stand-in device (tests/lab04/queued_device.h), with warm-up and repeat counts, each call's queued
// work and the work queued before the call drawn from the grader's seed. Times differ from run to run, so
// every output is what the contract fixes whatever the clock reads: the calls made and their order, the work
// still queued as each call starts (0: the device was synchronized before the clock), whether each sample
// covers its call's work (the device synchronized before the clock stopped), the statistics being those of
// the samples, nothing left running, bad counts refused. Each is an exact integer: a correct measure() gives
// the reference's outputs bit for bit. Where the grader has a CUDA GPU, the GPU exercise too: the parallel
// reduction's sums of squares of vectors whose lengths and values the seed draws.
#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "common/errors.h"
#include "common/timer.h"
#include "exercise.h"
#include "tests/lab04/queued_device.h"
#include "tests/support/checked.h"
#ifdef SPEEDLABS_LAB04_CUDA_KERNEL
#include "common/cuda/kernels.h"
#include "reduction.h"
#endif

namespace speedlabs::checked {

namespace {

using lab04::testing::QueuedDevice;
using std::chrono::milliseconds;

// Work queued before the timing starts: a measure() that does not synchronize first bills it to a call.
constexpr int64_t kEarlierWorkMinMs = 60, kEarlierWorkMaxMs = 100;
// Each call's own work, queued by the call and returning at once, like a kernel launch; the first call's is
// longer than any other's, so that a first_ms taken from a later call falls short of it.
constexpr int64_t kCallWorkMinMs = 1, kCallWorkMaxMs = 4;
constexpr int64_t kFirstCallWorkMinMs = 15, kFirstCallWorkMaxMs = 25;

torch::Tensor as_tensor(const std::vector<int64_t>& values) { return torch::tensor(values, torch::kLong); }

int64_t flag(bool value) { return value ? 1 : 0; }

// One side of the timing: each call records the work still queued as it starts, then queues its own.
struct TimedSide {
  std::vector<int64_t> work_ms;          // per call, drawn
  std::vector<int64_t> queued_at_start;  // per call made
  std::function<void()> call(QueuedDevice& device, std::vector<int64_t>& order, int64_t side) {
    return [this, &device, &order, side] {
      const size_t index = queued_at_start.size();
      queued_at_start.push_back(device.unfinished());
      order.push_back(side);
      device.submit(milliseconds(index < work_ms.size() ? work_ms[index] : kCallWorkMinMs));
    };
  }
};

std::vector<int64_t> draw_work(at::Generator& generator, int64_t calls) {
  std::vector<int64_t> work{draw_int(generator, kFirstCallWorkMinMs, kFirstCallWorkMaxMs)};
  for (int64_t i = 1; i < calls; ++i) work.push_back(draw_int(generator, kCallWorkMinMs, kCallWorkMaxMs));
  return work;
}

// Per sample: 1 when it is at least the work of the call it times (the first @p skip calls were warm-ups).
std::vector<int64_t> covers(const std::vector<double>& samples, const std::vector<int64_t>& work, size_t skip) {
  std::vector<int64_t> result;
  for (size_t i = 0; i < samples.size(); ++i) {
    const size_t call = skip + i;
    result.push_back(flag(call < work.size() && samples[i] >= static_cast<double>(work[call])));
  }
  return result;
}

// 1 per statistic (median, min, max, q1, q3) that equals the one summarize() takes from the samples.
std::vector<int64_t> statistics_of_samples(const TimingStats& stats) {
  if (stats.samples_ms.empty()) return {0, 0, 0, 0, 0};
  const TimingStats expected = summarize(stats.samples_ms);
  return {flag(stats.median_ms == expected.median_ms), flag(stats.min_ms == expected.min_ms),
          flag(stats.max_ms == expected.max_ms), flag(stats.q1_ms == expected.q1_ms),
          flag(stats.q3_ms == expected.q3_ms)};
}

// 1 for each bad count (repeats 0; warm-up -1) that @p timing refuses with a UsageError.
std::vector<int64_t> refusals(const std::function<void(TimingOptions)>& timing) {
  std::vector<int64_t> refused;
  for (const TimingOptions options : {TimingOptions{0, 0}, TimingOptions{-1, 3}}) {
    try {
      timing(options);
      refused.push_back(0);
    } catch (const UsageError&) {
      refused.push_back(1);
    }
  }
  return refused;
}

// The timing with @p warmup warm-up calls (or rounds) and a drawn number of measured ones.
TimingOptions draw_options(at::Generator& generator, int warmup) {
  return TimingOptions{warmup, static_cast<int>(draw_int(generator, 1, 5))};
}

// @p outputs' names prefixed with @p prefix.
Outputs prefixed(const std::string& prefix, Outputs outputs) {
  for (auto& output : outputs) output.first = prefix + output.first;
  return outputs;
}

// Each exercise timed twice: without warm-up (the first call is the first sample) and with 1-2 warm-ups (which
// stay out of the samples), so that every grade checks both.
Outputs with_and_without_warmup(at::Generator& generator, const std::function<Outputs(at::Generator&, int)>& timing) {
  Outputs outputs = prefixed("no_warmup_", timing(generator, 0));
  const Outputs warmed = prefixed("warmup_", timing(generator, static_cast<int>(draw_int(generator, 1, 2))));
  outputs.insert(outputs.end(), warmed.begin(), warmed.end());
  return outputs;
}

Outputs measure_outputs(at::Generator& generator, int warmup) {
  const TimingOptions options = draw_options(generator, warmup);
  const int64_t earlier_ms = draw_int(generator, kEarlierWorkMinMs, kEarlierWorkMaxMs);
  TimedSide side;
  side.work_ms = draw_work(generator, options.warmup + options.repeats);
  std::vector<int64_t> order;
  QueuedDevice device;
  device.submit(milliseconds(earlier_ms));
  const TimingStats stats = lab04::measure(side.call(device, order, 0), device, options);
  const bool first_is_sample =
      options.warmup > 0 || (!stats.samples_ms.empty() && stats.first_ms == stats.samples_ms[0]);
  const auto refused = refusals([&](TimingOptions bad) { lab04::measure([] {}, device, bad); });
  return {{"calls", as_tensor({static_cast<int64_t>(side.queued_at_start.size())})},
          {"queued_at_each_call_start", as_tensor(side.queued_at_start)},
          {"samples", as_tensor({static_cast<int64_t>(stats.samples_ms.size())})},
          {"sample_covers_its_call", as_tensor(covers(stats.samples_ms, side.work_ms, options.warmup))},
          {"first_ms_covers_the_first_call", as_tensor({flag(stats.first_ms >= side.work_ms.front())})},
          {"first_ms_is_the_first_sample_without_warmup", as_tensor({flag(first_is_sample)})},
          {"statistics_of_the_samples", as_tensor(statistics_of_samples(stats))},
          {"unfinished_after", as_tensor({device.unfinished()})},
          {"bad_counts_refused", as_tensor(refused)}};
}

Outputs measure_pair_outputs(at::Generator& generator, int warmup) {
  const TimingOptions options = draw_options(generator, warmup);
  const int64_t earlier_ms = draw_int(generator, kEarlierWorkMinMs, kEarlierWorkMaxMs);
  TimedSide a, b;
  a.work_ms = draw_work(generator, options.warmup + options.repeats);
  b.work_ms = draw_work(generator, options.warmup + options.repeats);
  std::vector<int64_t> order;  // 0 for a call of A, 1 for B
  QueuedDevice device;
  device.submit(milliseconds(earlier_ms));
  const lab04::PairTiming pair =
      lab04::measure_pair(a.call(device, order, 0), b.call(device, order, 1), device, options);
  // The per-round ratio, as the rounds' own samples give it.
  std::vector<double> ratios;
  for (size_t r = 0; r < pair.a.samples_ms.size() && r < pair.b.samples_ms.size(); ++r) {
    ratios.push_back(pair.a.samples_ms[r] / pair.b.samples_ms[r]);
  }
  const bool per_round = !ratios.empty() && pair.ratio.count == static_cast<int64_t>(ratios.size()) &&
                         std::abs(pair.ratio.median - summarize_samples(ratios).median) <= 1e-12 * pair.ratio.median;
  std::vector<int64_t> queued = a.queued_at_start;
  queued.insert(queued.end(), b.queued_at_start.begin(), b.queued_at_start.end());
  const auto refused = refusals([&](TimingOptions bad) { lab04::measure_pair([] {}, [] {}, device, bad); });
  return {{"order", as_tensor(order)},
          {"queued_at_each_call_start", as_tensor(queued)},
          {"samples",
           as_tensor({static_cast<int64_t>(pair.a.samples_ms.size()), static_cast<int64_t>(pair.b.samples_ms.size())})},
          {"a_sample_covers_its_call", as_tensor(covers(pair.a.samples_ms, a.work_ms, options.warmup))},
          {"b_sample_covers_its_call", as_tensor(covers(pair.b.samples_ms, b.work_ms, options.warmup))},
          {"first_ms_covers_the_first_calls",
           as_tensor({flag(pair.a.first_ms >= a.work_ms.front()), flag(pair.b.first_ms >= b.work_ms.front())})},
          {"a_statistics_of_the_samples", as_tensor(statistics_of_samples(pair.a))},
          {"b_statistics_of_the_samples", as_tensor(statistics_of_samples(pair.b))},
          {"ratio_per_round", as_tensor({flag(per_round)})},
          {"unfinished_after", as_tensor({device.unfinished()})},
          {"bad_counts_refused", as_tensor(refused)}};
}

#ifdef SPEEDLABS_LAB04_CUDA_KERNEL
// The reduction's sum on lengths from one element to past the largest grid's threads (the grid-stride loop must go
// round) and on values N(0, s^2) with s drawn from 1e-3..1e3, each launched once on GPU 0.
Outputs reduction_outputs(at::Generator& generator) {
  Outputs outputs;
  for (const int64_t most : {int64_t{1024}, int64_t{1} << 21}) {
    const int64_t n = draw_int(generator, 1, most);
    const double scale = std::pow(10.0, static_cast<double>(draw_int(generator, -3, 3)));
    const torch::Tensor x = torch::randn({n}, generator, torch::kFloat64) * scale;
    const double sum =
        speedlabs::cuda::sum_squares(x.data_ptr<double>(), n, lab04::launch_sum_squares_reduction, 0, 1).sum;
    outputs.emplace_back("sum_of_up_to_" + std::to_string(most), torch::tensor(sum, torch::kFloat64));
  }
  return outputs;
}
#endif

}  // namespace

// Every output of measure() and measure_pair() is an integer the contract fixes: bit-exact.
std::vector<Exercise> exercises() {
  std::vector<Exercise> checked = {
      {"measure", [](at::Generator& g) { return with_and_without_warmup(g, measure_outputs); }, Tolerance{}},
      {"measure_pair", [](at::Generator& g) { return with_and_without_warmup(g, measure_pair_outputs); }, Tolerance{}}};
#ifdef SPEEDLABS_LAB04_CUDA_KERNEL
  // Listed only where a GPU is: elsewhere its graded tests are skipped and it is worth nothing. Positive terms
  // summed in two orders (the reference's reduction and yours): within n * eps = 4.7e-10 relative for 2^21
  // doubles; 1e-9 leaves a margin and still catches one lost element in a million.
  if (speedlabs::cuda::find_gpus().count > 0)
    checked.push_back({"launch_sum_squares_reduction", reduction_outputs, Tolerance{1e-9, 0}});
#endif
  return checked;
}

}  // namespace speedlabs::checked
