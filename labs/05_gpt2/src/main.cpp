// Lab 05: GPT-2 on tiny shakespeare in fp32, tf32, bf16 and fp16. See README.md for the lesson.
#include "common/cli.h"
#include "experiment.h"

int main(int argc, char** argv) {
  speedlabs::Knobs<lab05::Config> knobs = lab05::knobs();
  return speedlabs::run_lab(
      argc, argv, {"05", "05_gpt2", "GPT-2 on tiny shakespeare in fp32, tf32, bf16 and fp16: speed and loss"},
      [&](CLI::App& app) { knobs.add_flags(app); },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab05::run(knobs.configure(context), context.device, report);
      });
}
