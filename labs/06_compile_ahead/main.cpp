// Lab 06: the GPT-2 speed ladder, side by side with PyTorch. See README.md for the lesson.
#include <sstream>

#include "common/cli.h"
#include "common/errors.h"
#include "experiment.h"

namespace {

// "4x128,16x1024" -> shapes; UsageError on anything else.
std::vector<lab06::Shape> parse_shapes(const std::string& text) {
  std::vector<lab06::Shape> shapes;
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    lab06::Shape shape;
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

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

}  // namespace

int main(int argc, char** argv) {
  lab06::Config config;
  std::string shapes, top = "cuda_graph", peer_modes = "fp32,tf32,bf16", compile_modes = "bf16";
  std::string python = SPEEDLABS_DEFAULT_PYTHON;
  bool no_peers = false, no_compile = false;
  int warmup = config.warmup, steps = config.steps, matmul_size = 0;
  CLI::Option *config_flag, *warmup_flag, *steps_flag, *modes_flag, *compile_flag;
  return speedlabs::run_lab(
      argc, argv, {"06", "06_compile_ahead", "the GPT-2 speed ladder, fp32 eager to a CUDA graph, beside PyTorch"},
      [&](CLI::App& app) {
        config_flag = app.add_option("--config", config.model, "model size: gpt2 (124M) or tiny (CPU-friendly)")
                          ->check(CLI::IsMember({"gpt2", "tiny"}))
                          ->capture_default_str();
        app.add_option("--shapes", shapes, "BxT list (default: 4x128,16x1024 on a GPU, 4x128 on a CPU)");
        warmup_flag = speedlabs::add_int_flag(app, "--warmup", warmup, "steps before the measured ones", 0);
        steps_flag = speedlabs::add_int_flag(app, "--steps", steps, "measured steps per rung");
        speedlabs::add_number_flag(app, "--lr", config.lr, "AdamW learning rate");
        app.add_option("--top", top, "the highest rung to climb to")
            ->check(CLI::IsMember({"fp32", "tf32", "bf16", "sdpa", "vocab50304", "fused_adamw", "cuda_graph"}))
            ->capture_default_str();
        // Under 256^3 the matmul takes microseconds and its rate is mostly timer noise.
        speedlabs::add_int_flag(app, "--matmul-size", matmul_size,
                                "n of the bf16 n^3 matmul that measures the peak (at least 256)", 256)
            ->default_str("8192 on a GPU, 1024 on a CPU, 256 with --quick");
        app.add_option("--python", python, "Python with torch for the peers")->capture_default_str();
        app.add_flag("--no-peers", no_peers, "skip the Python peers");
        modes_flag = app.add_option("--peer-modes", peer_modes, "precisions of the Python peers (fp32,tf32,bf16)")
                         ->capture_default_str();
        compile_flag = app.add_option("--compile-modes", compile_modes,
                                      "precisions of the torch.compile peers (on a CPU only when given)")
                           ->capture_default_str();
        app.add_flag("--no-compile", no_compile, "skip the torch.compile peers");
        app.add_option("--results", config.results_dir, "write ladder.json, ladder.md and ladder.dat here");
        app.add_option("--data-dir", config.data_dir, "data directory (default: $SPEEDLABS_DATA_DIR, then <repo>/data)");
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        if (context.flags.quick) {
          // --quick picks small defaults; flags given explicitly still win.
          const lab06::Config quick = lab06::quick_config();
          if (!config_flag->count()) config.model = quick.model;
          if (!warmup_flag->count()) warmup = quick.warmup;
          if (!steps_flag->count()) steps = quick.steps;
          if (!modes_flag->count()) peer_modes = "fp32,bf16";
          config.shapes = quick.shapes;
          config.matmul_size = quick.matmul_size;
        } else if (!context.device.is_cuda()) {
          lab06::adapt_to_cpu(config);
        }
        if (!shapes.empty()) config.shapes = parse_shapes(shapes);
        if (matmul_size > 0) config.matmul_size = matmul_size;
        for (const auto& mode : split(peer_modes + "," + compile_modes)) {
          if (!mode.empty() && mode != "fp32" && mode != "tf32" && mode != "bf16") {
            throw speedlabs::UsageError("--peer-modes/--compile-modes: each must be fp32, tf32 or bf16, not '" + mode + "'");
          }
        }
        config.peer_modes = split(peer_modes);
        if (config.peer_modes.empty() && split(compile_modes).empty()) {
          throw speedlabs::UsageError("--peer-modes and --compile-modes are both empty: use --no-peers instead");
        }
        // torch.compile on a CPU needs a C++ toolchain at run time and a minute or more of compiling per
        // peer: there it runs only when asked for by name.
        const bool compile = !no_compile && (context.device.is_cuda() || compile_flag->count() > 0);
        config.compile_modes = compile ? split(compile_modes) : std::vector<std::string>{};
        config.python = no_peers ? "" : python;
        config.warmup = warmup;
        config.steps = steps;
        config.top = lab06::parse_rung(top);
        lab06::run(config, context.device, report);
      });
}
