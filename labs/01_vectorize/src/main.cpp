// Lab 01: vectorise first. See README.md for the lesson.
#include "common/cli.h"
#include "experiment.h"

int main(int argc, char** argv) {
  speedlabs::Knobs<lab01::Config> knobs = lab01::knobs();
  return speedlabs::run_lab(
      argc, argv,
      {"01", "01_vectorize", "a loop vs vectorised code, same result, measured speed-up (runs on the CPU)", true},
      [&](CLI::App& app) { knobs.add_flags(app); },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab01::run(knobs.configure(context), report);
      });
}
