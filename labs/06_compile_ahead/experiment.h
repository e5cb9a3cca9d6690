/// @file labs/06_compile_ahead/experiment.h
/// @brief Lab 06: the GPT-2 speed ladder (fp32 eager up to a CUDA-graph-captured step), side by side
/// with the Python reference model run eagerly and with torch.compile.
#pragma once
#include <c10/core/Device.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/contention.h"
#include "common/observations.h"
#include "common/timer.h"
#include "exercise.h"
#include "optimizers.h"

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

/// The experiment's knobs; the defaults are the GPU run (both shapes, every rung, the GPU goals).
struct Config {
  std::string model = "gpt2";   ///< speedlabs::gpt::GPTConfig preset: "gpt2" or "tiny"
  std::vector<Shape> shapes{{4, 128}, {16, 1024}};  ///< the chapter's shape and build-nanogpt's
  int warmup = 5;               ///< steps run before the measured ones (their losses are logged too)
  int steps = 20;               ///< measured steps per rung
  double lr = 6e-4;             ///< AdamW learning rate (build-nanogpt's)
  uint64_t seed = 42;           ///< torch seed for the initial weights (the same for every rung)
  Rung top = Rung::cuda_graph;  ///< the highest rung to climb to
  int64_t matmul_size = 8192;   ///< n of the n x n x n bfloat16 matmul that measures the peak rate
  std::string data_dir;         ///< --data-dir ("" = $SPEEDLABS_DATA_DIR, then the checkout's data/)
  std::string python;           ///< Python with torch for the peers ("" = no peers)
  std::vector<std::string> peer_modes{"fp32", "tf32", "bf16"};  ///< precisions of the eager peers
  /// Precisions of the torch.compile peers (each compiles for a minute or so; the goals need only bf16).
  std::vector<std::string> compile_modes{"bf16"};
  std::string results_dir;      ///< write ladder.json, ladder.md and ladder.dat here ("" = none)
};

/// The CPU defaults: B=4, T=128 only (B=16, T=1024 takes minutes per step on a CPU), a 1024 matmul,
/// no torch.compile peers unless asked for (they need a C++ toolchain at run time and a minute or more of
/// compiling each).
/// @param config the configuration to adapt
void adapt_to_cpu(Config& config);

/// --quick: the tiny model, B=2, T=32, 2 + 4 steps, a 256 matmul, the eager peers in fp32 and bf16 only.
Config quick_config();

/// What one rung (or one Python peer) measured at one shape.
struct RungResult {
  std::string name;            ///< the rung's name, or the peer's ("python_eager_bf16", "python_compile_bf16")
  Shape shape;                 ///< the batch shape
  bool ran = false;            ///< false: not applicable here (see reason)
  std::string reason;          ///< why it did not run
  double first_step_ms = 0;    ///< the time until the first step in the rung's final form is done
  double median_ms = 0;        ///< median step time of the measured steps
  double tokens_per_s = 0;     ///< B*T / median step time
  double tflops = 0;           ///< useful FLOP/s (FLOPs per token of the unpadded model) in 10^12
  double mfu = 0;              ///< tflops / the measured bfloat16 matmul rate; NaN off a CUDA GPU (see mfu_of)
  std::optional<int64_t> peak_bytes;  ///< peak device memory allocated (nullopt on the CPU)
  std::vector<double> losses;  ///< every step's loss, warm-up steps included
  std::string detail;          ///< e.g. the attention backend that ran
  speedlabs::Summary step_ms;  ///< the measured steps' times (median, quartiles, spread), in milliseconds
  speedlabs::Contention contention;  ///< how busy the machine was while it ran (a peer: its whole script)
};

/// The whole run.
struct LadderResult {
  double bf16_matmul_tflops = 0;  ///< the measured peak (the best of the timed repeats), the MFU's denominator
  std::vector<RungResult> rungs;  ///< every rung at every shape, in order
  std::vector<RungResult> peers;  ///< the Python peers, in order
};

/// FLOPs of one training step per token, 6 N + 12 L H Q T (the PaLM estimate the chapter uses): 6 N for
/// the matmuls with the weights (forward 2 N, backward 4 N) and 12 L H Q T for attention's two matmuls.
/// N leaves out the position embedding (a lookup, no matmul); the tied token embedding counts once,
/// as the lm_head.
/// @param n_params_without_wpe N
/// @param n_layer L
/// @param n_head  H
/// @param head_size Q
/// @param seq     T
double flops_per_token(int64_t n_params_without_wpe, int64_t n_layer, int64_t n_head, int64_t head_size, int64_t seq);

/// Timed repeats of an n x n x n bfloat16 matrix multiply, and the rates they give.
struct MatmulPeak {
  double tflops = 0;              ///< the peak: the best repeat's rate (a peak is a maximum), in 10^12 FLOP/s
  double median_tflops = 0;       ///< the median repeat's rate
  speedlabs::TimingStats time;    ///< the repeats (milliseconds), with the machine's reading
  double flops = 0;               ///< 2 n^3
};

/// Times an n x n x n bfloat16 matrix multiply on @p device: warm-up, then repeats until their spread is
/// small or a second is spent. Throws speedlabs::UsageError for n < 1.
/// @param device where to measure
/// @param n      the matrix size
MatmulPeak measure_bf16_matmul(const c10::Device& device, int64_t n);

/// The peak rate of measure_bf16_matmul() in 10^12 FLOP/s (the best of the timed repeats).
/// @param device where to measure
/// @param n      the matrix size
double measure_bf16_matmul_tflops(const c10::Device& device, int64_t n);

/// Which fused attention kernel at::scaled_dot_product_attention picks for causal attention of this
/// shape and dtype on @p device (at::_fused_sdp_choice): "flash_attention", "efficient_attention",
/// "cudnn_attention", "math", ... On the CPU "flash_attention" is libtorch's CPU flash kernel.
/// @param device    where
/// @param shape     B and T
/// @param n_head    H
/// @param head_size Q
/// @param dtype     the dtype of q, k and v
std::string sdpa_backend(const c10::Device& device, const Shape& shape, int64_t n_head, int64_t head_size,
                         c10::ScalarType dtype);

/// Climbs the ladder at every shape of @p config from the same initial weights and batches, runs the
/// Python peers on the same weights and batches (both sides keeping freed host memory, see
/// speedlabs::keep_freed_host_memory()), prints the tables and records the observations
/// bf16_matmul_tflops, rung_RUNG_BxT, initial_losses_agree_BxT, losses_track_fp32_BxT, python_peers_BxT,
/// python_eager_matches_cpp_fp32_BxT, python_compile_tracks_cpp_BxT and the GPU goals goal_* (reported, never
/// must-hold; judged only on a CUDA GPU). A rung whose loss is not finite fails its observation. Throws speedlabs::UsageError for
/// a shape longer than the model's block and speedlabs::RuntimeFailure when the data is missing.
/// @param config the run
/// @param device where to train
/// @param report receives the observations
LadderResult run(const Config& config, const c10::Device& device, speedlabs::Report& report);

}  // namespace lab06
