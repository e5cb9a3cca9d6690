/// @file labs/01_vectorize/src/experiment.h
/// @brief Lab 01: the same sum of squares five ways, checked equal, then timed; and the same float sum
/// compiled for each instruction set this CPU has.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "common/cli.h"
#include "common/observations.h"
#include "common/timer.h"

namespace lab01 {

/// (a) One libtorch op per element: the C++ picture of an interpreted loop.
double sum_squares_tensor_loop(const torch::Tensor& x);

/// (b) A plain compiled scalar loop over the raw doubles.
double sum_squares_scalar_loop(const double* data, int64_t n);

/// The experiment's knobs.
struct Config {
  int64_t n = 1'000'000;                                ///< how many N(0,1) doubles
  uint64_t seed = 0;                                    ///< the generator seed
  speedlabs::TimingOptions fast{3, 20, 60, 0.05, 2.0};  ///< for (b), (c), (d), (e): rounds added while scattered
  speedlabs::TimingOptions element_loop{1, 3};          ///< for (a), hundreds of times slower
  int64_t isa_values = 4096;                            ///< floats per pass of the per-ISA sums: 16 KiB, in L1
  int isa_passes = 1024;                                ///< passes per timed call, so a call takes tens of us
  speedlabs::TimingOptions isa{3, 15, 45, 0.05, 2.0};   ///< for the per-ISA sums
};

/// The sums of isa_sums.h, by kernel.
enum IsaKernel { kIsaLoop, kIsaSimdLoop, kIsaEigen, kIsaKernels };

/// One instruction set's build of the same float sums (isa_sums.h), and whether this CPU runs it.
struct IsaBuild {
  const char* name = "";   ///< "sse2", "avx2", "avx512"
  int float_lanes = 0;     ///< floats in one vector register: 4, 8, 16
  bool supported = false;  ///< this CPU and its OS run it (__builtin_cpu_supports)
  float (*sum[kIsaKernels])(const float* data, int64_t n) = {};  ///< by IsaKernel
};

/// The builds, narrowest first (SSE2, the x86-64 baseline, is always supported); empty off x86-64.
std::vector<IsaBuild> isa_builds();

/// The lab's knobs, each once: its flags with their defaults (Config) and --quick values. --quick times a
/// tenth of the values over fewer, shorter rounds, so the whole run takes well under a second.
inline speedlabs::Knobs<Config> knobs() {
  speedlabs::Knobs<Config> knobs;
  knobs.flag("--n", "how many values", &Config::n).quick(100'000).check(CLI::Range(int64_t{1}, int64_t{1} << 31));
  knobs
      .flag(
          "--repeats", "measured calls of each fast variant", [](auto& c) -> auto& { return c.fast.repeats; })
      .quick(10)
      .check(CLI::Range(1, 100000));
  knobs.seed_flag(&Config::seed);
  knobs.setting([](auto& c) -> auto& { return c.fast.warmup; }).quick(2);
  knobs.setting([](auto& c) -> auto& { return c.fast.max_repeats; }).quick(30);
  knobs.setting([](auto& c) -> auto& { return c.fast.budget_s; }).quick(1.0);
  knobs.setting([](auto& c) -> auto& { return c.element_loop.warmup; }).quick(0);
  knobs.setting(&Config::isa_passes).quick(256);
  knobs.setting(&Config::isa).quick({2, 10, 30, 0.05, 1.0});
  return knobs;
}

/// What --quick runs before any flag (the tests start from it).
inline Config quick_config() { return knobs().quick(); }

/// Runs the five variants on the CPU and records same_result, vectorised_3x_faster,
/// scalar_loop_vs_eigen, unrolled_vs_scalar_loop, unrolled_vs_eigen and torch_vs_eigen; then the per-ISA
/// builds of one float sum: same_sum_per_isa_agrees and same_sum_per_isa.
void run(const Config& config, speedlabs::Report& report);

}  // namespace lab01
