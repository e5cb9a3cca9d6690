/// @file labs/06_compile_ahead/src/experiment.h
/// @brief Lab 06: the GPT-2 speed ladder (fp32 eager up to a CUDA-graph-captured step), side by side
/// with the Python reference model run eagerly and with torch.compile.
#pragma once
#include <c10/core/Device.h>
#include <torch/types.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/contention.h"
#include "common/errors.h"
#include "common/observations.h"
#include "common/timer.h"
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

/// "4x128,16x1024" -> shapes; throws speedlabs::UsageError on anything else.
inline std::vector<Shape> parse_shapes(const std::string& text) {
  std::vector<Shape> shapes;
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    Shape shape;
    char x = 0;
    std::istringstream in(item);
    if (!(in >> shape.batch >> x >> shape.seq) || x != 'x' || !in.eof() || shape.batch < 1 || shape.seq < 1) {
      throw speedlabs::UsageError("--shapes: expected BxT[,BxT...] with positive numbers, got '" + text + "'");
    }
    shapes.push_back(shape);
  }
  if (shapes.empty()) throw speedlabs::UsageError("--shapes: give at least one BxT");
  return shapes;
}

/// @p shapes as --shapes takes them: "4x128,16x1024".
inline std::string shapes_text(const std::vector<Shape>& shapes) {
  std::string text;
  for (const auto& shape : shapes) {
    text += (text.empty() ? "" : ",") + std::to_string(shape.batch) + "x" + std::to_string(shape.seq);
  }
  return text;
}

/// A comma-separated list (--peer-modes, --compile-modes) as its items; empty items are dropped.
inline std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

/// @p items as a comma-separated list, the way --peer-modes takes them.
inline std::string join_list(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ",") + item;
  return text;
}

/// The check on --peer-modes and --compile-modes: a comma-separated list of the peers' precisions (may be empty).
inline CLI::Validator peer_mode_list() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        for (const auto& mode : split_list(text)) {
          if (mode != "fp32" && mode != "tf32" && mode != "bf16")
            return "each mode must be fp32, tf32 or bf16, not '" + mode + "'";
        }
        return "";
      },
      "MODE[,MODE...]");
}

/// A flag for a list of the peers' precisions, the field @p member.
inline speedlabs::Knob<Config, std::string>& peer_modes_flag(speedlabs::Knobs<Config>& knobs, std::string name,
                                                             std::string help,
                                                             std::vector<std::string> Config::*member) {
  return knobs
      .flag<std::string>(
          std::move(name), std::move(help), [member](const Config& c) { return join_list(c.*member); },
          [member](Config& c, const std::string& text) { c.*member = split_list(text); })
      .check(peer_mode_list());
}

/// The lab's knobs, each once: its flags with their defaults (Config), their --quick values and what a CPU
/// changes (adapt_to_cpu()). --quick climbs the ladder with the tiny model on one small shape, and runs the
/// eager peers in fp32 and bf16 only.
inline speedlabs::Knobs<Config> knobs() {
  speedlabs::Knobs<Config> knobs;
  knobs.model_flag(&Config::model).quick("tiny");
  knobs
      .flag<std::string>(
          "--shapes", "BxT list", [](const Config& c) { return shapes_text(c.shapes); },
          [](Config& c, const std::string& text) { c.shapes = parse_shapes(text); })
      .quick("2x32");
  knobs.flag("--warmup", "steps before the measured ones", &Config::warmup).quick(2).check(speedlabs::at_least(0));
  knobs.flag("--steps", "measured steps per rung", &Config::steps).quick(4).check(speedlabs::at_least(1));
  knobs.flag("--lr", "AdamW learning rate", &Config::lr).check(speedlabs::finite_above());
  knobs
      .flag<std::string>(
          "--top", "the highest rung to climb to", [](const Config& c) { return to_string(c.top); },
          [](Config& c, const std::string& top) { c.top = parse_rung(top); })
      .check(CLI::IsMember(all_rung_names()));
  // Under 256^3 the matmul takes microseconds and its rate is mostly timer noise.
  knobs.flag("--matmul-size", "n of the bf16 n^3 matmul that measures the peak, at least 256", &Config::matmul_size)
      .quick(256)
      .check(speedlabs::at_least(int64_t{256}));
  knobs.flag("--python", "Python with torch for the peers", &Config::python);
  peer_modes_flag(knobs, "--peer-modes", "precisions of the Python peers", &Config::peer_modes).quick("fp32,bf16");
  // torch.compile on a CPU needs a C++ toolchain at run time and a minute or more of compiling per peer:
  // adapt_to_cpu() leaves it out, and it runs there only when asked for by name.
  peer_modes_flag(knobs, "--compile-modes", "precisions of the torch.compile peers (on a CPU only when given)",
                  &Config::compile_modes)
      .quick("");
  knobs.flag("--results", "write ladder.json, ladder.md and ladder.dat here", &Config::results_dir);
  knobs.data_dir_flag(&Config::data_dir);
  knobs.adapt(
      "on a CPU", [](const c10::Device& device) { return !device.is_cuda(); },
      [](Config& config, bool quick) {
        if (!quick) adapt_to_cpu(config);
      });
  return knobs;
}

/// What --quick runs before any flag and any device adaptation (the tests start from it).
inline Config quick_config() { return knobs().quick(); }

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
/// bf16_matmul_tflops, rung_RUNG_BxT, initial_losses_BxT, losses_track_fp32_BxT, python_peers_BxT,
/// python_eager_vs_cpp_fp32_BxT, python_compile_tracks_cpp_BxT and the GPU goals goal_* (reported, never
/// must-hold; judged only on a CUDA GPU). A rung whose loss is not finite fails its observation. Throws
/// speedlabs::UsageError for a shape longer than the model's block and speedlabs::RuntimeFailure when the data is
/// missing.
/// @param config the run
/// @param device where to train
/// @param report receives the observations
LadderResult run(const Config& config, const c10::Device& device, speedlabs::Report& report);

}  // namespace lab06
