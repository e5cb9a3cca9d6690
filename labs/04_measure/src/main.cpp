// Lab 04: measure before you believe. See README.md for the lesson.
#include "common/cli.h"
#include "experiment.h"

int main(int argc, char** argv) {
  speedlabs::Knobs<lab04::Config> knobs = lab04::knobs();
  return speedlabs::run_lab(
      argc, argv, {"04", "04_measure", "fp32 vs bf16 on CPU and GPU, the synchronize trap, warm-up, a CUDA kernel"},
      [&](CLI::App& app) { knobs.add_flags(app); },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab04::Config config = knobs.configure(context);
        config.cpu_only = context.flags.device == "cpu";
        lab04::run(config, context.device, report);
      });
}
