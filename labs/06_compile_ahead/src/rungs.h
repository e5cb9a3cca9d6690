/// @file labs/06_compile_ahead/src/rungs.h
/// @brief The ladder's rungs: their names, the shapes and results they share, and the peaks their MFUs divide by.
/// What trains them is in rung_runner.h.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/contention.h"
#include "common/peaks.h"
#include "common/precision.h"
#include "common/timer.h"

namespace lab06 {

/// The rungs of the ladder; each keeps everything of the rungs before it.
enum class Rung {
  fp32,         ///< float32, "highest" matmul precision, the chapter's written-out attention, ForeachAdamW
  tf32,         ///< + float32 matmuls may use TF32 tensor cores ("high")
  bf16,         ///< + autocast to bfloat16 for the forward pass and the loss
  sdpa,         ///< + at::scaled_dot_product_attention (flash / cuDNN / memory-efficient kernels)
  vocab50304,   ///< + the vocabulary padded from 50,257 to 50,304 rows
  fused_adamw,  ///< + the fused AdamW kernel, step counts and learning rate on the device
  cuda_graph,   ///< + the whole training step captured once as a CUDA graph and replayed (CUDA only)
};

/// Every rung, bottom to top.
const std::vector<Rung>& all_rungs();
/// Their names, bottom to top (the choices of --top).
const std::vector<std::string>& all_rung_names();
/// "fp32", "tf32", "bf16", "sdpa", "vocab50304", "fused_adamw", "cuda_graph".
/// @param rung the rung
std::string to_string(Rung rung);
/// Parses a rung name; throws speedlabs::UsageError for anything else.
/// @param name the name, as to_string() writes it
Rung parse_rung(const std::string& name);

/// The smallest multiple of @p multiple that is at least @p vocab_size: GPT-2's 50,257 tokens padded to
/// a multiple of 128 give 50,304 (= 2^7 * 393), a width the matrix-multiply kernels tile without a ragged edge.
/// Throws speedlabs::UsageError when either argument is not positive.
/// @param vocab_size the real number of tokens
/// @param multiple   the tile width to round up to
int64_t padded_vocab_size(int64_t vocab_size, int64_t multiple);

/// A batch shape.
struct Shape {
  int64_t batch = 4;  ///< B
  int64_t seq = 128;  ///< T
  /// "4x128"
  std::string name() const;
};

/// What one rung (or one Python peer) measured at one shape.
struct RungResult {
  std::string name;                   ///< the rung's name, or the peer's ("python_eager_bf16", "python_compile_bf16")
  Shape shape;                        ///< the batch shape
  bool ran = false;                   ///< false: not applicable here (see reason)
  std::string reason;                 ///< why it did not run
  double first_step_ms = 0;           ///< the time until the first step in the rung's final form is done
  double median_ms = 0;               ///< median step time of the measured steps
  double tokens_per_s = 0;            ///< B*T / median step time
  double tflops = 0;                  ///< useful FLOP/s (FLOPs per token of the unpadded model) in 10^12
  double mfu = 0;                     ///< tflops / the measured matmul peak of its format (MfuPeaks::apply)
  double mfu_theoretical = 0;         ///< tflops / the theoretical peak of its format (NaN where none is known)
  std::optional<int64_t> peak_bytes;  ///< peak device memory allocated (nullopt on the CPU)
  std::vector<double> losses;         ///< every step's loss, warm-up steps included
  std::string detail;                 ///< e.g. the attention backend that ran
  speedlabs::Summary step_ms;         ///< the measured steps' times (median, quartiles, spread), in milliseconds
  speedlabs::Contention contention;   ///< how busy the machine was while it ran (a peer: its whole script)
};

/// GPT-2's real vocabulary is padded up to a multiple of this tile width by the vocab50304 rung (50,304 = 128 * 393).
inline constexpr int64_t kVocabTile = 128;

/// True when @p rung is @p step or above it: each rung keeps everything of the rungs below.
bool at_least(Rung rung, Rung step);

/// The precision mode of lab 05's training step that a rung runs in: from bf16 up every rung is bf16.
speedlabs::Precision rung_precision(Rung rung);

/// The precision a rung is compared in with the Python eager peers ("" from sdpa up: those rungs have no peer).
std::string peer_mode(Rung rung);

/// Model FLOPs utilisation: useful FLOP/s over a peak of the format the step's matmuls run in (an fp32 rung
/// against a bf16 peak once gave 140% on a CPU whose bf16 is slower: a ratio to another format's peak says
/// nothing). NaN when the peak is unknown (0).
/// @param tflops      the step's useful FLOP/s in 10^12
/// @param peak_tflops the peak in 10^12 FLOP/s
double mfu_of(double tflops, double peak_tflops);

/// The format a rung's matmuls run in: fp32 and tf32 as named, bf16 from the bf16 rung up.
/// @param rung the rung
speedlabs::PeakFormat rung_format(Rung rung);

/// The format a Python peer's matmuls run in, from its name ("python_eager_bf16": bf16).
/// @param name the peer's name
speedlabs::PeakFormat peer_format(const std::string& name);

/// The peaks the MFUs divide by, for each format a rung runs in: measured in this run, and theoretical.
struct MfuPeaks {
  std::map<speedlabs::PeakFormat, double> measured_tflops;                  ///< the best repeat of a large matmul
  std::map<speedlabs::PeakFormat, speedlabs::TheoreticalPeak> theoretical;  ///< the CPU's formula, the GPU's datasheet
  /// Sets @p r's mfu and mfu_theoretical from its tflops, against the peaks of @p format.
  /// @param r      a rung or peer with its tflops set
  /// @param format the format its matmuls run in
  void apply(RungResult& r, speedlabs::PeakFormat format) const;
};

/// A rate readable on a CPU (tens of GFLOP/s) and on a GPU (hundreds of TFLOP/s).
std::string flops_rate(double tflops);

}  // namespace lab06
