// Lab 09: attention without the T x T matrix. See README.md for the lesson.
#include "common/cli.h"
#include "common/files.h"
#include "experiment.h"

int main(int argc, char** argv) {
  using lab09::Config;
  speedlabs::ConfigFlags<Config> flags;
  return speedlabs::run_lab(
      argc, argv,
      {"09", "09_flash_attention",
       "attention without the T x T matrix: online softmax, tiled (flash) attention on the CPU and in CUDA"},
      [&](CLI::App& app) {
        flags.int_option(app, "--q-tile", &Config::q_tile, "query rows per block of the tiled forward");
        flags.int_option(app, "--kv-tile", &Config::kv_tile, "keys per block of the tiled forward");
        flags.int_option(app, "--repeats", &Config::repeats,
                         "timed rounds per T, at least (each calls every method once)");
        flags.option(app, "--plots", &Config::plots_dir, "write lab09_attention_vs_T.svg here (gnuplot)");
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        const Config config = flags.configure(context, lab09::quick_config);
        if (!config.plots_dir.empty()) speedlabs::require_output_folder(config.plots_dir);
        lab09::run(config, context.device, report);
      });
}
