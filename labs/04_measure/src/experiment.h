/// @file labs/04_measure/src/experiment.h
/// @brief Lab 04: measure before you believe. fp32 vs bf16 on the CPU and the GPU, the synchronize
/// trap, warm-up, peak memory, and a CUDA kernel of the project's own (one thread vs a reduction).
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "common/cli.h"
#include "common/observations.h"
#include "common/timer.h"

namespace lab04 {

/// What the CPU offers for bfloat16 arithmetic, from the kernel's CPU flags.
struct CpuFeatures {
  std::string model;         ///< "model name" from /proc/cpuinfo, empty when unknown
  bool known = false;        ///< false when no flags line could be read (not Linux, no /proc)
  bool avx512f = false;      ///< 512-bit vectors
  bool avx512_bf16 = false;  ///< AVX-512 BF16: bfloat16 dot products in vector registers
  bool amx_bf16 = false;     ///< AMX-BF16: bfloat16 matrix tiles (Sapphire Rapids and later)
};

/// Reads the model name and the first "flags" line out of /proc/cpuinfo-formatted @p text.
CpuFeatures parse_cpuinfo(const std::string& text);

/// parse_cpuinfo() of this machine's /proc/cpuinfo (known = false where there is none).
CpuFeatures read_cpu_features();

/// The experiment's knobs.
struct Config {
  int64_t batch = 256;          ///< rows of the lesson's input (256x512)
  int64_t large_batch = 16384;  ///< GPU only: big enough that the GPU computes longer than the host takes to queue
  uint64_t seed = 0;            ///< model and input seed
  speedlabs::TimingOptions timing{3, 20};        ///< every benchmark variant
  int interleave_rounds = 10;                    ///< rounds of the changing-load demonstration, each side
  int64_t kernel_n = 1 << 20;                    ///< doubles summed by the CUDA kernels
  speedlabs::TimingOptions kernel_timing{1, 5};  ///< launches of each CUDA kernel
  bool cpu_only = false;  ///< --device cpu: leave any GPU alone, its observations are not_applicable
};

/// The lab's knobs, each once: its flags with their defaults (Config) and --quick values. --quick makes fewer
/// timed calls on a smaller large batch and kernel; the lesson's batch stays.
inline speedlabs::Knobs<Config> knobs() {
  speedlabs::Knobs<Config> knobs;
  knobs.flag("--batch", "rows of the lesson's input", &Config::batch)
      .check(CLI::Range(int64_t{1}, int64_t{1} << 16));  // 65536 rows: a 512 MiB hidden layer
  knobs
      .flag(
          "--repeats", "measured calls per variant", [](auto& c) -> auto& { return c.timing.repeats; })
      .quick(5)
      .check(CLI::Range(1, 100000));
  knobs
      .flag(
          "--warmup", "warm-up calls per variant", [](auto& c) -> auto& { return c.timing.warmup; })
      .quick(1)
      .check(CLI::Range(0, 100000));
  // More rounds than the full run: --quick must still decide its must-hold observation.
  knobs.setting(&Config::interleave_rounds).quick(16);
  knobs.setting(&Config::large_batch).quick(8192);
  knobs.setting(&Config::kernel_n).quick(int64_t{1} << 18);
  knobs.setting([](auto& c) -> auto& { return c.kernel_timing.repeats; }).quick(3);
  return knobs;
}

/// What --quick runs before any flag (the tests start from it).
inline Config quick_config() { return knobs().quick(); }

/// Runs the benchmark on the CPU, and on @p device too when it is a CUDA GPU, then the CUDA kernels
/// when a GPU is there; records autocast_bf16_output_dtype, cpu_fp32_ms, cpu_bf16_ms, cpu_bf16_vs_fp32,
/// interleaving_resists_a_changing_load, first_call_slower_than_median, gpu_unsynced_time_is_misleading,
/// gpu_bf16_vs_fp32, gpu_parallel_kernel_vs_serial and gpu_kernel_matches_cpu (the gpu_ ones not_applicable without a
/// GPU). Every benchmark time comes from lab04::measure() or lab04::measure_pair(), the exercise; the parallel kernel
/// is lab04::launch_sum_squares_reduction, the GPU exercise.
void run(const Config& config, const c10::Device& device, speedlabs::Report& report);

}  // namespace lab04
