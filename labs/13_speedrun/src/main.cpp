// Lab 13: the CPU speedrun. See README.md for the lesson.
#include "common/build_paths.h"
#include "common/cli.h"
#include "experiment.h"

int main(int argc, char** argv) {
  speedlabs::Knobs<lab13::Config> knobs = lab13::knobs();
  knobs.base().python = speedlabs::configured_python();
  return speedlabs::run_lab(
      argc, argv,
      {"13", "13_speedrun", "the CPU speedrun: your trainer against the baseline to a target validation loss", true},
      [&](CLI::App& app) { knobs.add_flags(app); },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab13::run(knobs.configure(context), context.device, report);
      });
}
