/// @file labs/12_fusion/src/experiment.h
/// @brief Lab 12: the logits that never exist (a chunked LM head with its cross-entropy, against the plain one,
/// in memory, time and a few GPT-2 training steps) and a memory-bound op fused by hand (bias + GELU), placed
/// on lab 07's roofline of this machine.
#pragma once
#include <c10/core/Device.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/observations.h"
#include "common/timer.h"

namespace lab12 {

/// The run's knobs; the defaults are GPT-2 small's head at B = 8, T = 256.
struct Config {
  std::string model = "gpt2";  ///< --config: "tiny" or "gpt2" (common/gpt.h): C and V of the head, the model trained
  int64_t batch = 8;           ///< --batch: the largest B of the memory sweep (also B/4 and B/2), and of the timing
  int64_t seq = 256;           ///< --seq: T
  int64_t chunk = 256;         ///< --chunk: rows (tokens) per chunk of the chunked head
  int gpt_steps = 3;           ///< training steps of the GPT-2 comparison (the first one's peak is not compared)
  int64_t fused_rows = 8192;   ///< rows of the bias + GELU input (B*T tokens)...
  int64_t fused_cols = 3072;   ///< ... of GPT-2's MLP width 4C: 96 MiB of float32, beyond the roof's streams
  int warmup = 1;              ///< unmeasured rounds before each interleaved timing
  int repeats = 5;             ///< measured rounds, at least (more while the samples scatter, within a budget)
  std::string plots_dir;       ///< --plots: write lab12_peak_memory.svg here ("" = no plot)
  uint64_t seed = 0;           ///< torch seed of the inputs and the model
};

/// The lab's knobs, each once: its flags with their defaults (Config) and --quick values. --quick uses the tiny
/// model's head (C = 64, the full vocabulary) on shorter sequences.
inline speedlabs::Knobs<Config> knobs() {
  speedlabs::Knobs<Config> knobs;
  knobs.model_flag(&Config::model).quick("tiny");
  knobs.flag("--batch", "the largest B (the memory sweep also runs B/4 and B/2)", &Config::batch)
      .check(speedlabs::at_least(int64_t{1}));
  knobs.flag("--seq", "T, at most the model's block size", &Config::seq)
      .quick(64)
      .check(speedlabs::at_least(int64_t{1}));
  knobs.flag("--chunk", "rows (tokens) per chunk of the chunked head", &Config::chunk)
      .quick(64)
      .check(speedlabs::at_least(int64_t{1}));
  knobs.flag("--repeats", "timed rounds per comparison, at least", &Config::repeats)
      .quick(3)
      .check(speedlabs::at_least(1));
  knobs.flag("--plots", "write lab12_peak_memory.svg here (gnuplot)", &Config::plots_dir);
  return knobs;
}

/// What --quick runs before any flag (the tests start from it).
inline Config quick_config() { return knobs().quick(); }

/// How far the chunked loss may be from the plain one, relative, in float32 and in bfloat16 (see README.md).
inline constexpr double kLossRtolFloat = 1e-5;
/// See kLossRtolFloat.
inline constexpr double kLossRtolBf16 = 1e-2;
/// How far a chunked gradient may be from the plain one: max |difference| over max |plain|, per dtype.
inline constexpr double kGradRtolFloat = 1e-4;
/// See kGradRtolFloat.
inline constexpr double kGradRtolBf16 = 3e-2;
/// The chunked head's extra peak at the largest B x T must be at most this share of the plain one's.
inline constexpr double kPeakShareLimit = 0.25;
/// The time goal of the chunked head over the plain one (reported).
inline constexpr double kTimeGoal = 1.3;
/// How far the GPT-2 training losses with the chunked head may be from the plain head's, per step.
inline constexpr double kGptLossAtol = 1e-4;
/// How far the fused bias + GELU may be from libtorch's unfused one (float32; tanh approximations differ).
inline constexpr double kFusedAtol = 1e-5;
/// A share of the memory roof above 1 + this means the measurement failed (the caches served part of it).
inline constexpr double kRoofTolerance = 0.25;
/// Where bias + GELU is memory bound, the fused op must be at least this many times faster than the unfused
/// chain (it moves half the bytes: 2x where both keep the memory equally busy; this leaves room for the tanh's
/// arithmetic).
inline constexpr double kFusedSpeedup = 1.3;

/// The two heads at one size.
struct HeadPeak {
  int64_t rows = 0;           ///< B x T
  int64_t plain_bytes = 0;    ///< extra peak bytes of one forward and backward of the plain head
  int64_t chunked_bytes = 0;  ///< the same for the chunked head
  int64_t logits_bytes = 0;   ///< B x T x V float32: the plain head's logits alone
};

/// Loss and gradients of both heads at one size and dtype.
struct Parity {
  std::string dtype;             ///< "float32" or "bfloat16"
  double plain_loss = 0;         ///< libtorch's linear + cross_entropy
  double chunked_loss = 0;       ///< chunked_cross_entropy
  double hidden_grad_error = 0;  ///< max |chunked - plain| of d hidden over max |plain|
  double weight_grad_error = 0;  ///< the same for d weight
};

/// Everything the run measured.
struct Results {
  std::vector<Parity> parity;              ///< float32, then bfloat16
  std::vector<HeadPeak> peaks;             ///< one per B x T, ascending
  speedlabs::Interleaved head_timing;      ///< plain, chunked forward + backward at the largest B x T
  std::vector<double> plain_gpt_losses;    ///< per training step, with the plain head
  std::vector<double> chunked_gpt_losses;  ///< per training step, with the chunked head
  int64_t plain_gpt_peak = 0;              ///< the largest extra peak of a steady step (after the first), plain head
  int64_t chunked_gpt_peak = 0;            ///< the same with the chunked head
  double fused_max_error = 0;              ///< max |fused - unfused| of bias + GELU
  speedlabs::Interleaved fused_timing;     ///< unfused, fused
  double memory_roof = 0;                  ///< bytes/s: lab 07's memory roof of this device
  double ridge = 0;                        ///< FLOP/byte: where lab 07's float32 matmul roof meets the memory roof
};

/// The options of the interleaved timings: the config's warm-up and rounds, up to three times more rounds
/// while the samples scatter, within 10 s.
speedlabs::TimingOptions timing_options(const Config& config);

/// Extra peak bytes of tensors on @p device while @p call runs, beyond those live before it (the counting
/// allocator of common/host_memory.h on the CPU, the caching allocator's statistics on a GPU).
int64_t extra_peak_bytes(const std::function<void()>& call, const c10::Device& device);

/// Runs the whole lab on @p device, prints its tables, writes the plot and records the observations
/// chunked_loss_vs_plain, chunked_grads_match, peak_memory_vs_plain, time_vs_plain, gpt_step_with_chunked_head,
/// fused_matches_unfused, fused_bytes_moved and fused_vs_unfused_time.
Results run(const Config& config, const c10::Device& device, speedlabs::Report& report);

/// Writes lab12_peak_memory.svg into @p directory (gnuplot): the extra peak of the plain and the chunked head
/// against B x T. Returns false, after saying why on stderr, when gnuplot is missing or fails.
bool write_plot(const Results& results, const Config& config, const std::string& directory);

}  // namespace lab12
