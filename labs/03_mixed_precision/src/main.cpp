// Lab 03: mixed precision with autocast and a GradScaler. See README.md for the lesson.
#include "common/cli.h"
#include "experiment.h"

int main(int argc, char** argv) {
  speedlabs::Knobs<lab03::Config> knobs = lab03::knobs();
  return speedlabs::run_lab(
      argc, argv, {"03", "03_mixed_precision", "autocast's per-op policy, loss scaling, mixed-precision training"},
      [&](CLI::App& app) { knobs.add_flags(app); },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab03::Config config = knobs.configure(context);
        config.device = context.device;
        lab03::run(config, report);
      });
}
