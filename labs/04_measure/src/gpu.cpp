#include "gpu.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>
#include <vector>

#include "common/autocast_guard.h"
#include "common/contention.h"
#include "common/device.h"
#include "exercise.h"
#include "model.h"
#ifdef SPEEDLABS_LAB04_CUDA_KERNEL
#include "common/cuda/kernels.h"
#include "reduction.h"
#endif

namespace lab04 {

namespace {

// The trap: a host clock around work that is only queued. The GPU is synchronized after the clock
// is read, so each sample starts with an idle GPU; the work is done, it just is not what is timed.
speedlabs::TimingStats time_without_synchronize(const std::function<void()>& fn, const c10::Device& device,
                                                int repeats) {
  std::vector<double> samples;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    samples.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    speedlabs::synchronize(device);
  }
  return speedlabs::summarize(std::move(samples));
}

const char* const kUnsyncedClaim =
    "on a GPU a host clock read without synchronizing times the queuing, not the work: it reports a "
    "fraction of the real time";
const char* const kUnsyncedExpected = "host clock without synchronize < 0.5 x device-event time";
const char* const kGpuBf16Claim =
    "on a GPU the lesson's result flips: bf16 autocast is faster than fp32 (tensor cores), once the "
    "matmuls are large enough to outweigh launch and cast overhead";
const char* const kGpuBf16Expected = "reported: bf16/fp32 median < 1 at the large batch";

// Everything the GPU part times: four variants, the large batch timed three ways, and bf16 against fp32.
struct GpuTimings {
  Variant fp32, bf16, fp32_big, bf16_big;
  speedlabs::TimingStats events, unsynced;
  PairTiming big_pair;
  speedlabs::Contention contention;
};

GpuTimings time_on_gpu(const Config& config, const c10::Device& device) {
  auto model = make_model(config.seed);
  const torch::Tensor x = torch::randn({config.batch, 512}).to(device);
  const torch::Tensor big = torch::randn({config.large_batch, 512}).to(device);
  model->to(device);

  GpuTimings t;
  t.fp32 = run_variant(model, x, false, config.timing);  // the first GPU call is in here
  t.bf16 = run_variant(model, x, true, config.timing);
  t.fp32_big = run_variant(model, big, false, config.timing);
  t.bf16_big = run_variant(model, big, true, config.timing);

  torch::NoGradGuard no_grad;
  torch::Tensor out;
  const auto forward_big = [&] { out = model->forward(big); };
  const speedlabs::ContentionProbe probe;
  t.events = speedlabs::time_ms(forward_big, device, config.timing);
  t.unsynced = time_without_synchronize(forward_big, device, config.timing.repeats);
  // The verdict on bf16 against fp32 comes from rounds side by side at the large batch.
  TorchDevice gpu(device);
  t.big_pair = measure_pair([&] { out = model->forward(big); },
                            [&] {
                              speedlabs::AutocastGuard autocast(device.type(), torch::kBFloat16);
                              out = model->forward(big);
                            },
                            gpu, config.timing);
  t.contention = probe.read();
  return t;
}

void print_gpu_tables(const Config& config, const c10::Device& device, const GpuTimings& t) {
  print_header();
  for (const Variant* v : {&t.fp32, &t.bf16, &t.fp32_big, &t.bf16_big}) print_row(*v);
  std::cout << "\nThe synchronize trap, fp32 at batch " << config.large_batch << ":\n";
  print_header();
  print_row(device.str(), "no sync", config.large_batch, t.unsynced, "(host clock, work only queued)");
  print_row(device.str(), "sync", config.large_batch, t.fp32_big.timing, "(host clock, lab04::measure)");
  print_row(device.str(), "events", config.large_batch, t.events, "(device events, common/timer)");
}

void decide_synchronize_trap(const Config& config, const GpuTimings& t, speedlabs::Report& report) {
  std::vector<double> unsynced_over_events;  // each unsynchronized reading against the device-event median
  for (double ms : t.unsynced.samples_ms) unsynced_over_events.push_back(ms / t.events.median_ms);
  speedlabs::Evidence trap(speedlabs::summarize_samples(unsynced_over_events), t.contention,
                           speedlabs::LoadEffect::unknown);  // GPU times: the CPU's reading bounds nothing there
  trap.max_spread = 1.0;  // queuing times scatter widely; the claim is a factor of 2 away, not a few percent
  report.decide("gpu_unsynced_time_is_misleading", kUnsyncedClaim,
                {{"batch", config.large_batch},
                 {"unsynced_median_ms", t.unsynced.median_ms},
                 {"synced_median_ms", t.fp32_big.timing.median_ms},
                 {"events_median_ms", t.events.median_ms}},
                kUnsyncedExpected, trap, [](double ratio) { return ratio < 0.5; });
}

void decide_gpu_bf16(const Config& config, const GpuTimings& t, speedlabs::Report& report) {
  const double ratio = t.bf16.timing.median_ms / t.fp32.timing.median_ms;
  speedlabs::Evidence bf16_over_fp32 = ratio_evidence(invert(t.big_pair.ratio), t.contention);
  const double ratio_big = bf16_over_fp32.value.median;
  report.decide(
      "gpu_bf16_vs_fp32", kGpuBf16Claim,
      {{"batch", config.batch},
       {"ratio_bf16_over_fp32", ratio},
       {"large_batch", config.large_batch},
       {"ratio_bf16_over_fp32_large", ratio_big},
       {"fp32", timing_json(t.fp32.timing)},
       {"bf16", timing_json(t.bf16.timing)},
       {"memory",
        {{"fp32", t.fp32.memory.json},
         {"bf16", t.bf16.memory.json},
         {"fp32_large", t.fp32_big.memory.json},
         {"bf16_large", t.bf16_big.memory.json}}}},
      kGpuBf16Expected, bf16_over_fp32, [](double r) { return r < 1.0; }, false);
}

// --- the project's own CUDA kernel ----------------------------------------------------------------

const char* const kKernelSpeedClaim =
    "a parallel reduction is at least 100x faster than one GPU thread looping over the same data: a GPU "
    "is fast only when thousands of threads work at once";
const char* const kKernelSpeedExpected = "serial median / parallel median >= 100";
const char* const kKernelMatchClaim = "both CUDA kernels compute the CPU's sum of squares";
const char* const kKernelMatchExpected = "max relative difference <= 1e-9";

void kernels_not_applicable(const std::string& reason, speedlabs::Report& report) {
  report.not_applicable("gpu_parallel_kernel_vs_serial", kKernelSpeedClaim, kKernelSpeedExpected, reason);
  report.not_applicable("gpu_kernel_matches_cpu", kKernelMatchClaim, kKernelMatchExpected, reason);
}

#ifdef SPEEDLABS_LAB04_CUDA_KERNEL
// Both kernels on the same doubles, and the CPU's sum of them.
struct KernelTimings {
  double cpu_sum = 0;
  speedlabs::cuda::KernelRun serial, parallel;
  speedlabs::TimingStats serial_t, parallel_t;
  speedlabs::Contention contention;
};

KernelTimings time_kernels(const Config& config) {
  namespace kernels = speedlabs::cuda;
  torch::manual_seed(config.seed);
  const torch::Tensor x = torch::randn({config.kernel_n}, torch::kFloat64);
  const double* data = x.data_ptr<double>();
  KernelTimings k;
  for (int64_t i = 0; i < config.kernel_n; ++i) k.cpu_sum += data[i] * data[i];

  const auto& t = config.kernel_timing;
  const speedlabs::ContentionProbe probe;
  k.serial = kernels::sum_squares(data, config.kernel_n, kernels::launch_sum_squares_one_thread, t.warmup, t.repeats);
  k.parallel = kernels::sum_squares(data, config.kernel_n, launch_sum_squares_reduction, t.warmup, t.repeats);
  k.contention = probe.read();
  k.serial_t = speedlabs::summarize(k.serial.times_ms);
  k.parallel_t = speedlabs::summarize(k.parallel.times_ms);
  k.serial_t.first_ms = k.serial.first_ms;
  k.parallel_t.first_ms = k.parallel.first_ms;
  return k;
}

void decide_kernels(const Config& config, const KernelTimings& k, speedlabs::Report& report) {
  // Each serial launch against the parallel median: a factor of 100 is decided without interleaving.
  const double speedup = k.serial_t.median_ms / k.parallel_t.median_ms;
  std::vector<double> speedups;
  for (double ms : k.serial_t.samples_ms) speedups.push_back(ms / k.parallel_t.median_ms);
  speedlabs::Evidence kernel(speedlabs::summarize_samples(speedups), k.contention,
                             speedlabs::LoadEffect::unknown);  // GPU times: the CPU's reading bounds nothing there
  report.decide("gpu_parallel_kernel_vs_serial", kKernelSpeedClaim,
                {{"n", config.kernel_n},
                 {"serial_median_ms", k.serial_t.median_ms},
                 {"parallel_median_ms", k.parallel_t.median_ms},
                 {"speedup", speedup}},
                kKernelSpeedExpected, kernel, [](double s) { return s >= 100.0; });

  // Three addition orders (the CPU's one chain, the GPU thread's chain with fused multiply-adds, a
  // tree): positive terms, so each is within about n*eps relative of the exact sum; for n = 2^20 that
  // is 1e6 * 1.1e-16 = 1.2e-10, and 1e-9 still catches any wrong or missing element.
  const double diff = std::max(std::abs(k.serial.sum - k.cpu_sum), std::abs(k.parallel.sum - k.cpu_sum)) / k.cpu_sum;
  report.check(
      "gpu_kernel_matches_cpu", kKernelMatchClaim,
      {{"cpu", k.cpu_sum}, {"serial", k.serial.sum}, {"parallel", k.parallel.sum}, {"max_relative_difference", diff}},
      kKernelMatchExpected, diff <= 1e-9);
}
#endif

}  // namespace

Variant run_gpu(const Config& config, const c10::Device& device, speedlabs::Report& report) {
  std::cout << "\nGPU: " << speedlabs::describe(device) << "\n";
  const GpuTimings timings = time_on_gpu(config, device);
  print_gpu_tables(config, device, timings);
  decide_synchronize_trap(config, timings, report);
  decide_gpu_bf16(config, timings, report);
  return timings.fp32;
}

void gpu_not_applicable(const std::string& reason, speedlabs::Report& report) {
  report.not_applicable("gpu_unsynced_time_is_misleading", kUnsyncedClaim, kUnsyncedExpected, reason);
  report.not_applicable("gpu_bf16_vs_fp32", kGpuBf16Claim, kGpuBf16Expected, reason, false);
}

void run_kernels(const Config& config, speedlabs::Report& report) {
#ifdef SPEEDLABS_LAB04_CUDA_KERNEL
  const auto presence = speedlabs::cuda::find_gpus();
  if (config.cpu_only || presence.count == 0) {
    kernels_not_applicable(config.cpu_only ? "--device cpu: the GPU was not asked for" : presence.reason, report);
    return;
  }
  const KernelTimings timings = time_kernels(config);
  std::cout << "\nThe project's CUDA kernel, sum of " << config.kernel_n << " squared doubles (CUDA events):\n";
  print_header();
  print_row("cuda:0", "1 thread", config.kernel_n, timings.serial_t, "");
  print_row("cuda:0", "reduction", config.kernel_n, timings.parallel_t, "(yours: reduction.cu)");
  decide_kernels(config, timings, report);
#else
  (void)config;
  kernels_not_applicable("built without a CUDA compiler (nvcc not found at configure time)", report);
#endif
}

}  // namespace lab04
