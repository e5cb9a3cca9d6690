/// @file labs/09_flash_attention/src/experiment.h
/// @brief Lab 09: causal attention three ways on the CPU (written out, tiled, libtorch's SDPA), side by side
/// in time and peak memory, and the tiled forward as a CUDA kernel beside SDPA's GPU backends.
#pragma once
#include <c10/core/Device.h>
#include <torch/types.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/observations.h"
#include "common/timer.h"

namespace lab09 {

/// The experiment's knobs; the defaults are GPT-2 small's attention (12 heads of 64) at three lengths.
struct Config {
  std::vector<int64_t> seq_lengths{256, 1024, 4096};  ///< the T measured, ascending
  int64_t batch = 1;                                  ///< B
  int64_t heads = 12;                                 ///< n_head
  int64_t head_size = 64;                             ///< head_size
  int64_t q_tile = 256;                               ///< query rows per block of the tiled forward
  int64_t kv_tile = 256;                              ///< keys and values per block of the tiled forward
  int warmup = 1;                                     ///< unmeasured rounds per T (each round calls every method once)
  int repeats = 5;             ///< measured rounds per T, at least (the median is reported); more while the
                               ///< times scatter, up to kMaxRoundsFactor x this, within kRoundsBudgetS
  int64_t backward_seq = 256;  ///< T of the gradient check (the written-out backward holds 3 T x T matrices)
  std::string plots_dir;       ///< write lab09_attention_vs_T.svg here ("" = no plot)
  uint64_t seed = 0;           ///< torch seed for q, k, v
  bool progress_bar = true;    ///< a progress bar on stderr, only when stderr is a terminal
};

/// The three ways of computing the same attention.
enum class Method {
  written_out,  ///< lab 05's causal_attention: the T x T scores, their softmax, times v
  tiled,        ///< this lab's tiled_attention_forward
  sdpa          ///< at::scaled_dot_product_attention(is_causal=true)
};

/// "written_out", "tiled", "sdpa".
std::string to_string(Method method);

/// Rounds of the interleaved timing may grow to this many times Config::repeats while the times scatter...
inline constexpr int kMaxRoundsFactor = 3;
/// ... until the measured rounds of one T took this long.
inline constexpr double kRoundsBudgetS = 2.0;

/// One method at one T.
struct Measurement {
  Method method = Method::tiled;  ///< which attention
  speedlabs::TimingStats time;    ///< its side of the interleaved rounds (milliseconds)
  int64_t extra_bytes = 0;        ///< peak bytes of CPU tensors during one call beyond those live before it
};

/// Everything measured at one T.
struct SizeResult {
  int64_t seq = 0;                      ///< T
  std::vector<Measurement> methods;     ///< written_out, tiled, sdpa, in that order
  double max_error_vs_written_out = 0;  ///< max |tiled - written out| over every element
  double max_error_vs_sdpa = 0;         ///< max |tiled - SDPA| over every element
  /// The tiled forward's time over SDPA's within each round (the three methods are timed interleaved:
  /// written out, tiled, SDPA, then backwards), summarised over the rounds.
  speedlabs::Summary tiled_over_sdpa;
  speedlabs::Contention contention;  ///< how busy the machine was during this T's rounds
  /// The measurement of @p method (throws std::out_of_range when it is missing).
  const Measurement& of(Method method) const;
};

/// The tiled backward against autograd's through the written-out attention, each side called twice on the
/// same inputs: a side whose two calls differ computed something that depends on more than its inputs.
struct BackwardCheck {
  double max_abs_error = 0;                   ///< max |tiled gradient - autograd's| over dq, dk, dv and both calls
  std::string worst_gradient;                 ///< dq, dk or dv: where max_abs_error is
  double tiled_repeat_difference = 0;         ///< max |first call's tiled gradients - second call's|
  double reference_repeat_difference = 0;     ///< the same for autograd's gradients
  std::array<double, 2> tiled_call_errors{};  ///< max |tiled gradient - autograd's| of each tiled call
  double forward_repeat_difference = 0;       ///< max |first tiled forward's out and lse - second's|
  double backward_repeat_difference = 0;      ///< max |first tiled backward's gradients - second's|, one forward
};

/// The whole CPU comparison.
struct Results {
  std::vector<SizeResult> sizes;  ///< one per T, ascending
  std::string sdpa_cpu_kernel;    ///< the kernel at::_fused_sdp_choice picks for these CPU inputs
  BackwardCheck backward;         ///< the tiled gradients against autograd's, at backward_seq
};

/// How far the tiled output may be from the written-out one and from SDPA (float32, see experiment.cpp).
inline constexpr double kForwardTolerance = 2e-5;
/// How far the tiled gradients may be from autograd's through the written-out attention (float32).
inline constexpr double kBackwardTolerance = 1e-4;
/// The reference tiled forward's goal: at most this many times SDPA's time...
inline constexpr double kSdpaRatioGoal = 1.3;
/// ... at these T (tiled_vs_sdpa_time_at_1024 is the first; the default run's largest is the second).
inline constexpr std::array<int64_t, 2> kGoalSeqLengths{1024, 4096};

/// The lab's knobs, each once: its flags with their defaults (Config) and --quick values. --quick measures
/// shorter sequences, up to the first goal's T, with smaller tiles (seconds on a CPU).
inline speedlabs::Knobs<Config> knobs() {
  speedlabs::Knobs<Config> knobs;
  knobs.flag("--q-tile", "query rows per block of the tiled forward", &Config::q_tile)
      .quick(64)
      .check(speedlabs::at_least(int64_t{1}));
  knobs.flag("--kv-tile", "keys per block of the tiled forward", &Config::kv_tile)
      .quick(64)
      .check(speedlabs::at_least(int64_t{1}));
  knobs.flag("--repeats", "timed rounds per T, at least (each calls every method once)", &Config::repeats)
      .quick(3)
      .check(speedlabs::at_least(1));
  knobs.flag("--plots", "write lab09_attention_vs_T.svg here (gnuplot)", &Config::plots_dir);
  knobs.setting(&Config::seq_lengths).quick({64, 256, kGoalSeqLengths.front()});
  knobs.setting(&Config::backward_seq).quick(96);
  return knobs;
}

/// What --quick runs before any flag (the tests start from it).
inline Config quick_config() { return knobs().quick(); }

/// The growth exponent (log extra memory / log T between the two largest T) the tiled forward must stay
/// under, and the written-out one must exceed: linear is 1, quadratic 2.
inline constexpr double kLinearExponentLimit = 1.3;
/// The exponent the written-out attention must exceed, showing the measurement can see T^2 at all.
inline constexpr double kQuadraticExponentFloor = 1.7;

/// The most tile steps (a block of queries meeting a block of keys) one call of the tiled forward may take:
/// a call runs as one piece, and a stop (Ctrl-C, SIGTERM) is answered between calls, so it must stay short.
/// About a second on a busy 2-core CPU at 200 us a step; the default tiles take 136 at T=4096.
inline constexpr int64_t kMaxTileSteps = 4096;

/// The tile steps of one tiled forward: each block of @p q_tile queries meets the blocks of @p kv_tile keys
/// up to its last row (causal).
/// @param seq     T
/// @param q_tile  query rows per block (at least 1)
/// @param kv_tile keys per block (at least 1)
int64_t tile_steps(int64_t seq, int64_t q_tile, int64_t kv_tile);

/// The name of the SDPA kernel libtorch would run for these inputs (at::_fused_sdp_choice), with is_causal.
/// @param q any query tensor of the shape and device to ask about (k and v alike)
std::string sdpa_kernel_name(const torch::Tensor& q);

/// Runs the CPU comparison at every T of @p config (and, when @p device is a CUDA GPU, the CUDA kernel
/// beside SDPA's GPU backends), prints the table, writes the plot, and records the observations
/// tiled_matches_reference, tiled_backward_matches_autograd, tiled_peak_memory_linear_in_T,
/// tiled_vs_sdpa_time, tiled_vs_sdpa_time_at_1024, written_out_vs_tiled_memory_at_4096, cuda_kernel_matches_sdpa and
/// cuda_kernel_vs_sdpa_time. Throws speedlabs::UsageError, before any work, when no T is given or the
/// tiles make more than kMaxTileSteps at the largest T, and speedlabs::RuntimeFailure when Ctrl-C stops the run.
/// @param config the run
/// @param device the lab's device: the CPU part always runs; a CUDA device adds the kernel's part
/// @param report receives the observations
/// @return the CPU measurements
Results run(const Config& config, const c10::Device& device, speedlabs::Report& report);

/// Writes lab09_attention_vs_T.svg into @p directory with gnuplot (started through run_process): median
/// time and extra peak memory of each method against T, log-log. Returns false, after printing why to
/// stderr, when gnuplot is missing or fails; the lab goes on without the plot.
/// @param results   the measurements
/// @param directory where the SVG goes (created if needed)
bool write_plot(const Results& results, const std::string& directory);

}  // namespace lab09
