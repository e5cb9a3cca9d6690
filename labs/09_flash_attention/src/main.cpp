// Lab 09: attention without the T x T matrix. See README.md for the lesson.
#include "common/cli.h"
#include "common/files.h"
#include "experiment.h"

int main(int argc, char** argv) {
  speedlabs::Knobs<lab09::Config> knobs = lab09::knobs();
  return speedlabs::run_lab(
      argc, argv,
      {"09", "09_flash_attention",
       "attention without the T x T matrix: online softmax, tiled (flash) attention on the CPU and in CUDA"},
      [&](CLI::App& app) { knobs.add_flags(app); },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        const lab09::Config config = knobs.configure(context);
        if (!config.plots_dir.empty()) speedlabs::require_output_folder(config.plots_dir);
        lab09::run(config, context.device, report);
      });
}
