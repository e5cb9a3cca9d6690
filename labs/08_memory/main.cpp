// Lab 08: where the memory of a training step goes, and activation checkpointing. See README.md.
#include "common/cli.h"
#include "common/files.h"
#include "experiment.h"

int main(int argc, char** argv) {
  using lab08::Config;
  speedlabs::ConfigFlags<Config> flags;
  return speedlabs::run_lab(
      argc, argv,
      {"08", "08_memory", "where the memory of a training step goes, predicted and measured; checkpointing"},
      [&](CLI::App& app) {
        flags.model_option(app, &Config::model);
        flags.int_option(app, "--batch", &Config::batch, "B of the measured step");
        flags.int_option(app, "--seq", &Config::seq, "T of the measured step (checkpointing also runs T/2)");
        flags.number_option(app, "--budget-mb", &Config::budget_mb, "memory budget for the largest batch, MiB");
        flags.int_option(app, "--warmup", &Config::warmup, "timed steps discarded first", 0);
        flags.int_option(app, "--repeats", &Config::repeats, "timed steps measured");
        flags.option(app, "--results", &Config::results_dir,
                     "write memory_phases.dat, memory_phases.gp and memory_phases.svg (gnuplot) here");
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        Config config = flags.configure(context, lab08::quick_config);
        const int64_t seq = config.seq;
        config.checkpoint_seqs = seq > 1 ? std::vector<int64_t>{seq / 2, seq} : std::vector<int64_t>{seq};
        if (!config.results_dir.empty()) speedlabs::require_output_folder(config.results_dir);
        lab08::run(config, context.device, report);
      });
}
