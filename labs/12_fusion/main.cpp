// Lab 12: the logits that never exist, and a memory-bound op fused by hand. See README.md for the lesson.
#include "common/cli.h"
#include "common/files.h"
#include "experiment.h"

int main(int argc, char** argv) {
  using lab12::Config;
  speedlabs::ConfigFlags<Config> flags;
  return speedlabs::run_lab(
      argc, argv,
      {"12", "12_fusion", "fusion: a chunked LM head with its cross-entropy, and bias + GELU fused by hand"},
      [&](CLI::App& app) {
        flags.model_option(app, &Config::model);
        flags.int_option(app, "--batch", &Config::batch, "the largest B (the memory sweep also runs B/4 and B/2)");
        flags.int_option(app, "--seq", &Config::seq, "T, at most the model's block size");
        flags.int_option(app, "--chunk", &Config::chunk, "rows (tokens) per chunk of the chunked head");
        flags.int_option(app, "--repeats", &Config::repeats, "timed rounds per comparison, at least");
        flags.option(app, "--plots", &Config::plots_dir, "write lab12_peak_memory.svg here (gnuplot)");
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        const Config config = flags.configure(context, lab12::quick_config);
        if (!config.plots_dir.empty()) speedlabs::require_output_folder(config.plots_dir);
        lab12::run(config, context.device, report);
      });
}
