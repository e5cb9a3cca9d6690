// Lab 06: the GPT-2 speed ladder, side by side with PyTorch. See README.md for the lesson.
#include <sstream>

#include "common/build_paths.h"
#include "common/cli.h"
#include "common/errors.h"
#include "common/process.h"
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

// --peer-modes and --compile-modes: a comma-separated list of the peers' precisions (may be empty).
const CLI::Validator kPeerModeList(
    [](std::string& text) -> std::string {
      for (const auto& mode : split(text)) {
        if (mode != "fp32" && mode != "tf32" && mode != "bf16")
          return "each mode must be fp32, tf32 or bf16, not '" + mode + "'";
      }
      return "";
    },
    "MODE[,MODE...]");

}  // namespace

int main(int argc, char** argv) {
  using lab06::Config;
  speedlabs::ConfigFlags<Config> flags;
  std::string shapes, top = "cuda_graph", peer_modes = "fp32,tf32,bf16", compile_modes = "bf16";
  flags.parsed().python = speedlabs::configured_python();
  bool no_peers = false, no_compile = false;
  return speedlabs::run_lab(
      argc, argv, {"06", "06_compile_ahead", "the GPT-2 speed ladder, fp32 eager to a CUDA graph, beside PyTorch"},
      [&](CLI::App& app) {
        flags.model_option(app, &Config::model);
        flags.on_given(app.add_option("--shapes", shapes, "BxT list (default: 4x128,16x1024 on a GPU, 4x128 on a CPU)"),
                       [&](Config& config) { config.shapes = parse_shapes(shapes); });
        flags.int_option(app, "--warmup", &Config::warmup, "steps before the measured ones", 0);
        flags.int_option(app, "--steps", &Config::steps, "measured steps per rung");
        flags.number_option(app, "--lr", &Config::lr, "AdamW learning rate");
        flags.on_given(app.add_option("--top", top, "the highest rung to climb to")
                           ->check(CLI::IsMember(lab06::all_rung_names()))
                           ->capture_default_str(),
                       [&](Config& config) { config.top = lab06::parse_rung(top); });
        // Under 256^3 the matmul takes microseconds and its rate is mostly timer noise.
        flags
            .int_option(app, "--matmul-size", &Config::matmul_size,
                        "n of the bf16 n^3 matmul that measures the peak (at least 256)", int64_t{256})
            ->default_str("8192 on a GPU, 1024 on a CPU, 256 with --quick");
        flags.option(app, "--python", &Config::python, "Python with torch for the peers");
        app.add_flag("--no-peers", no_peers, "skip the Python peers");
        flags.on_given(app.add_option("--peer-modes", peer_modes, "precisions of the Python peers")
                           ->check(kPeerModeList)
                           ->capture_default_str(),
                       [&](Config& config) { config.peer_modes = split(peer_modes); });
        // torch.compile on a CPU needs a C++ toolchain at run time and a minute or more of compiling per
        // peer: adapt_to_cpu() leaves it out, and it runs there only when asked for by name.
        flags.on_given(app.add_option("--compile-modes", compile_modes,
                                      "precisions of the torch.compile peers (on a CPU only when given)")
                           ->check(kPeerModeList)
                           ->capture_default_str(),
                       [&](Config& config) { config.compile_modes = split(compile_modes); });
        app.add_flag("--no-compile", no_compile, "skip the torch.compile peers");
        flags.option(app, "--results", &Config::results_dir, "write ladder.json, ladder.md and ladder.dat here");
        flags.data_dir_option(app, &Config::data_dir);
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        Config config = flags.configure(context, lab06::quick_config, [](Config& base, const auto& context) {
          if (!context.flags.quick && !context.device.is_cuda()) lab06::adapt_to_cpu(base);
          base.python = speedlabs::configured_python();
        });
        if (no_compile) config.compile_modes.clear();
        if (no_peers) config.python.clear();
        if (!config.python.empty()) speedlabs::require_program(config.python, "--python");
        if (!config.python.empty() && config.peer_modes.empty() && config.compile_modes.empty()) {
          throw speedlabs::UsageError("--peer-modes and --compile-modes are both empty: use --no-peers instead");
        }
        lab06::run(config, context.device, report);
      });
}
