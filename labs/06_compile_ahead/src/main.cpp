// Lab 06: the GPT-2 speed ladder, side by side with PyTorch. See README.md for the lesson.
#include "common/build_paths.h"
#include "common/cli.h"
#include "common/errors.h"
#include "common/process.h"
#include "experiment.h"

int main(int argc, char** argv) {
  speedlabs::Knobs<lab06::Config> knobs = lab06::knobs();
  knobs.base().python = speedlabs::configured_python();
  bool no_peers = false, no_compile = false;
  return speedlabs::run_lab(
      argc, argv, {"06", "06_compile_ahead", "the GPT-2 speed ladder, fp32 eager to a CUDA graph, beside PyTorch"},
      [&](CLI::App& app) {
        knobs.add_flags(app);
        app.add_flag("--no-peers", no_peers, "skip the Python peers");
        app.add_flag("--no-compile", no_compile, "skip the torch.compile peers");
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab06::Config config = knobs.configure(context);
        if (no_compile) config.compile_modes.clear();
        if (no_peers) config.python.clear();
        if (!config.python.empty()) speedlabs::require_program(config.python, "--python");
        if (!config.python.empty() && config.peer_modes.empty() && config.compile_modes.empty()) {
          throw speedlabs::UsageError("--peer-modes and --compile-modes are both empty: use --no-peers instead");
        }
        lab06::run(config, context.device, report);
      });
}
