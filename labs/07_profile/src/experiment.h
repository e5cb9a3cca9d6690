/// @file labs/07_profile/src/experiment.h
/// @brief Lab 07: where a training step's time goes. A profiler trace of one GPT-2 step, the host cost
/// of one op in C++ and in Python, the roofline of this machine with the step's ops on it, and a loader
/// that keeps the device fed.
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "common/cli.h"
#include "common/observations.h"

namespace lab07 {

/// The experiment's knobs; the defaults suit a CPU (main.cpp picks larger sizes on a GPU).
struct Config {
  std::string model = "tiny";  ///< speedlabs::gpt::GPTConfig preset: "tiny" or "gpt2"
  int64_t batch = 4;           ///< B of the profiled step and of the loader's batches
  int64_t seq = 64;            ///< T
  double lr = 6e-4;            ///< AdamW learning rate
  int warmup = 2;              ///< steps before anything is measured (allocation, caches, kernel choice)
  int steps = 5;               ///< timed steps (without the profiler); the step time is their median
  int top = 12;                ///< ops printed and plotted, by self time
  std::string trace_path;      ///< --trace: the Chrome/Perfetto trace JSON of the profiled step ("" = none)
  std::string plots_dir;       ///< --plots: lab07_top_ops.svg and lab07_roofline.svg ("" = none)
  std::string python;          ///< Python with torch for the per-op cost ("" = C++ only)
  int op_calls = 2000;         ///< tiny ops per timed repeat (per-op cost = repeat time / calls)
  int op_repeats = 7;          ///< timed repeats of op_calls (median)
  int64_t matmul_size = 1024;  ///< n of the n x n x n matmuls that measure the peak FLOP/s
  int64_t stream_mib = 256;    ///< MiB per array of the copy and triad that measure the bandwidth
  int feed_steps = 12;         ///< timed training steps of each way of feeding the loop
  int64_t doc_kib = 1024;      ///< KiB of text the loader tokenizes for each sequence (on a CPU half a step)
  int64_t prefetch = 2;        ///< capacity of the prefetching loader's queue
  std::string data_dir;        ///< --data-dir ("" = $SPEEDLABS_DATA_DIR, then data/ in the checkout)
};

/// Larger sizes for a GPU: B=16, T=256, an 8192 matmul, 1 GiB streams, more tiny-op calls, and 4 KiB
/// documents (a GPU step takes milliseconds: one worker keeps up only with a loader that costs less).
/// @param config the configuration to adapt (flags given explicitly are set afterwards by main)
void adapt_to_gpu(Config& config);

/// The lab's knobs, each once: its flags with their defaults (Config), their --quick values and what a GPU
/// changes (adapt_to_gpu(); under --quick its matmul is smaller). --quick takes fewer steps and repeats, a
/// smaller matmul and stream: seconds on a CPU.
inline speedlabs::Knobs<Config> knobs() {
  speedlabs::Knobs<Config> knobs;
  knobs.model_flag(&Config::model);
  knobs.flag("--batch", "B, sequences per batch", &Config::batch).check(speedlabs::at_least(int64_t{1}));
  knobs.flag("--seq", "T, tokens per sequence", &Config::seq).check(speedlabs::at_least(int64_t{1}));
  knobs.flag("--warmup", "steps before anything is measured", &Config::warmup).quick(1).check(speedlabs::at_least(0));
  knobs.flag("--steps", "timed steps for the step time", &Config::steps).quick(3).check(speedlabs::at_least(1));
  knobs.flag("--trace", "write the profiled step's Chrome/Perfetto trace JSON here", &Config::trace_path);
  knobs.flag("--plots", "write lab07_top_ops.svg and lab07_roofline.svg here (gnuplot)", &Config::plots_dir);
  knobs.flag("--top", "ops shown and plotted, by self time", &Config::top).check(speedlabs::at_least(1));
  knobs.flag("--python", "Python with torch for the per-op cost", &Config::python);
  knobs.flag("--op-calls", "tiny ops per timed repeat", &Config::op_calls).quick(500).check(speedlabs::at_least(1));
  knobs.flag("--matmul-size", "n of the matmul that measures the peak FLOP/s", &Config::matmul_size)
      .quick(512)
      .check(speedlabs::at_least(int64_t{1}));
  knobs.flag("--stream-mib", "MiB per array of the bandwidth copy and triad", &Config::stream_mib)
      .quick(64)
      .check(speedlabs::at_least(int64_t{1}));
  // Three blocks of four each way: three pairs of blocks decide prefetch_hides_loading.
  knobs.flag("--feed-steps", "timed steps of each loader loop", &Config::feed_steps)
      .quick(12)
      .check(speedlabs::at_least(1));
  knobs.flag("--doc-kib", "KiB of text tokenized per sequence by the loader", &Config::doc_kib)
      .check(speedlabs::at_least(int64_t{1}));
  knobs.flag("--prefetch", "batches the prefetching loader keeps ready", &Config::prefetch)
      .check(speedlabs::at_least(int64_t{1}));
  knobs.data_dir_flag(&Config::data_dir);
  knobs.setting(&Config::op_repeats).quick(5);
  knobs.adapt(
      "on a GPU", [](const c10::Device& device) { return device.is_cuda(); },
      [](Config& config, bool quick) {
        adapt_to_gpu(config);
        if (quick) config.matmul_size = 4096;
      });
  return knobs;
}

/// What --quick runs before any flag and any device adaptation (the tests start from it).
inline Config quick_config() { return knobs().quick(); }

/// Runs the four parts on @p device and records the observations:
/// trace_has_step_ranges, trace_written (with --trace), top_op_shares_sum_to_step, gpu_kernels_in_trace;
/// op_overhead_cpp_us, op_overhead_python_us, op_overhead_python_over_cpp, step_host_overhead_share;
/// peak_matmul_flops, peak_bandwidth, roofline_<op> for each op, elementwise_ops_are_memory_bound,
/// matmuls_are_compute_bound; loader_cost_ms, prefetch_same_batches, prefetch_hides_loading,
/// batches_pinned (GPU).
/// Throws speedlabs::RuntimeFailure when the data is missing or a loss is not finite.
/// @param config the run
/// @param device where to train and measure
/// @param report receives the observations
void run(const Config& config, const c10::Device& device, speedlabs::Report& report);

}  // namespace lab07
