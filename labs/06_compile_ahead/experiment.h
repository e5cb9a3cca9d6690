/// @file labs/06_compile_ahead/experiment.h
/// @brief Lab 06: the GPT-2 speed ladder (fp32 eager up to a CUDA-graph-captured step), side by side
/// with the Python reference model run eagerly and with torch.compile.
#pragma once
#include <c10/core/Device.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/contention.h"
#include "common/observations.h"
#include "common/timer.h"
#include "exercise.h"
#include "optimizers.h"
#include "rungs.h"

namespace lab06 {

/// The experiment's knobs; the defaults are the GPU run (both shapes, every rung, the GPU goals).
struct Config {
  std::string model = "gpt2";                       ///< speedlabs::gpt::GPTConfig preset: "gpt2" or "tiny"
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
  std::string results_dir;  ///< write ladder.json, ladder.md and ladder.dat here ("" = none)
  /// The peers of one shape take minutes (torch.compile included); one still running after this is hung and
  /// is stopped. Not a flag: the tests shorten it.
  double peer_timeout_s = 3600;
};

/// The CPU defaults: B=4, T=128 only (B=16, T=1024 takes minutes per step on a CPU), a 1024 matmul,
/// no torch.compile peers unless asked for (they need a C++ toolchain at run time and a minute or more of
/// compiling each).
/// @param config the configuration to adapt
void adapt_to_cpu(Config& config);

/// --quick: the tiny model, B=2, T=32, 2 + 4 steps, a 256 matmul, the eager peers in fp32 and bf16 only.
Config quick_config();

/// The whole run.
struct LadderResult {
  double bf16_matmul_tflops = 0;  ///< the measured bf16 peak (the best of the timed repeats)
  MfuPeaks peaks;                 ///< every format's measured and theoretical peak, the MFUs' denominators
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
  double tflops = 0;            ///< the peak: the best repeat's rate (a peak is a maximum), in 10^12 FLOP/s
  double median_tflops = 0;     ///< the median repeat's rate
  speedlabs::TimingStats time;  ///< the repeats (milliseconds), with the machine's reading
  double flops = 0;             ///< 2 n^3
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
/// must-hold; judged only on a CUDA GPU). A rung whose loss is not finite fails its observation. Throws
/// speedlabs::UsageError for a shape longer than the model's block and speedlabs::RuntimeFailure when the data is
/// missing.
/// @param config the run
/// @param device where to train
/// @param report receives the observations
LadderResult run(const Config& config, const c10::Device& device, speedlabs::Report& report);

}  // namespace lab06
