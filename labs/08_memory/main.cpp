// Lab 08: where the memory of a training step goes, and activation checkpointing. See README.md.
#include "common/cli.h"
#include "experiment.h"

int main(int argc, char** argv) {
  lab08::Config config;
  int batch = static_cast<int>(config.batch), seq = static_cast<int>(config.seq);
  int warmup = config.warmup, repeats = config.repeats;
  CLI::Option *batch_flag, *seq_flag, *budget_flag, *repeats_flag;
  return speedlabs::run_lab(
      argc, argv, {"08", "08_memory", "where the memory of a training step goes, predicted and measured; checkpointing"},
      [&](CLI::App& app) {
        app.add_option("--config", config.model, "model size: tiny (CPU-friendly) or gpt2 (124M)")
            ->check(CLI::IsMember({"tiny", "gpt2"}))
            ->capture_default_str();
        batch_flag = speedlabs::add_int_flag(app, "--batch", batch, "B of the measured step");
        seq_flag = speedlabs::add_int_flag(app, "--seq", seq, "T of the measured step (checkpointing also runs T/2)");
        budget_flag = app.add_option("--budget-mb", config.budget_mb, "memory budget for the largest batch, MiB")
                          ->check(CLI::PositiveNumber)
                          ->capture_default_str();
        speedlabs::add_int_flag(app, "--warmup", warmup, "timed steps discarded first", 0);
        repeats_flag = speedlabs::add_int_flag(app, "--repeats", repeats, "timed steps measured");
        app.add_option("--results", config.results_dir,
                       "write memory_phases.dat, memory_phases.gp and memory_phases.svg (gnuplot) here");
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        if (context.flags.quick) {
          // --quick picks small defaults; flags given explicitly still win.
          const lab08::Config quick = lab08::quick_config();
          if (!batch_flag->count()) batch = static_cast<int>(quick.batch);
          if (!seq_flag->count()) seq = static_cast<int>(quick.seq);
          if (!budget_flag->count()) config.budget_mb = quick.budget_mb;
          if (!repeats_flag->count()) repeats = quick.repeats;
        }
        config.batch = batch;
        config.seq = seq;
        config.checkpoint_seqs = seq > 1 ? std::vector<int64_t>{seq / 2, seq} : std::vector<int64_t>{seq};
        config.warmup = warmup;
        config.repeats = repeats;
        lab08::run(config, context.device, report);
      });
}
