// Lab 12: the logits that never exist, and a memory-bound op fused by hand. See README.md for the lesson.
#include "common/cli.h"
#include "common/files.h"
#include "experiment.h"

int main(int argc, char** argv) {
  speedlabs::Knobs<lab12::Config> knobs = lab12::knobs();
  return speedlabs::run_lab(
      argc, argv,
      {"12", "12_fusion", "fusion: a chunked LM head with its cross-entropy, and bias + GELU fused by hand"},
      [&](CLI::App& app) { knobs.add_flags(app); },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        const lab12::Config config = knobs.configure(context);
        if (!config.plots_dir.empty()) speedlabs::require_output_folder(config.plots_dir);
        lab12::run(config, context.device, report);
      });
}
