// Lab 02: the limits of 16-bit numbers. See README.md for the lesson.
#include "common/cli.h"
#include "experiment.h"

int main(int argc, char** argv) {
  speedlabs::Knobs<lab02::Config> knobs = lab02::knobs();
  return speedlabs::run_lab(
      argc, argv,
      {"02", "02_float16_limits",
       "range vs precision of float32, tf32, float16 and bfloat16, in Eigen and libtorch. "
       "Runs on the CPU whatever --device says: rounding belongs to the number format, not to the device; "
       "--quick changes nothing, the whole lab takes well under a second",
       true},
      [&](CLI::App& app) { knobs.add_flags(app); },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab02::run(knobs.configure(context), report);
      });
}
