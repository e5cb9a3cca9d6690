// Lab 08: where the memory of a training step goes, and activation checkpointing. See README.md.
#include "common/cli.h"
#include "common/files.h"
#include "experiment.h"

int main(int argc, char** argv) {
  speedlabs::Knobs<lab08::Config> knobs = lab08::knobs();
  return speedlabs::run_lab(
      argc, argv,
      {"08", "08_memory", "where the memory of a training step goes, predicted and measured; checkpointing"},
      [&](CLI::App& app) { knobs.add_flags(app); },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab08::Config config = knobs.configure(context);
        config.checkpoint_seqs = lab08::checkpoint_seqs_for(config.seq);
        if (!config.results_dir.empty()) speedlabs::require_output_folder(config.results_dir);
        lab08::run(config, context.device, report);
      });
}
