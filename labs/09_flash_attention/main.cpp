// Lab 09: attention without the T x T matrix. See README.md for the lesson.
#include "common/cli.h"
#include "experiment.h"

int main(int argc, char** argv) {
  lab09::Config config;
  int q_tile = static_cast<int>(config.q_tile);
  int kv_tile = static_cast<int>(config.kv_tile);
  int repeats = config.repeats;
  CLI::Option* q_tile_flag = nullptr;
  CLI::Option* kv_tile_flag = nullptr;
  CLI::Option* repeats_flag = nullptr;
  return speedlabs::run_lab(
      argc, argv,
      {"09", "09_flash_attention",
       "attention without the T x T matrix: online softmax, tiled (flash) attention on the CPU and in CUDA"},
      [&](CLI::App& app) {
        q_tile_flag = speedlabs::add_int_flag(app, "--q-tile", q_tile, "query rows per block of the tiled forward");
        kv_tile_flag = speedlabs::add_int_flag(app, "--kv-tile", kv_tile, "keys per block of the tiled forward");
        repeats_flag = speedlabs::add_int_flag(app, "--repeats", repeats, "timed calls per method and T");
        app.add_option("--plots", config.plots_dir, "write lab09_attention_vs_T.svg here (gnuplot)");
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        if (context.flags.quick) {
          // --quick picks small sizes; flags given explicitly still win.
          const lab09::Config quick = lab09::quick_config();
          config.seq_lengths = quick.seq_lengths;
          config.backward_seq = quick.backward_seq;
          if (!q_tile_flag->count()) q_tile = static_cast<int>(quick.q_tile);
          if (!kv_tile_flag->count()) kv_tile = static_cast<int>(quick.kv_tile);
          if (!repeats_flag->count()) repeats = quick.repeats;
        }
        config.q_tile = q_tile;
        config.kv_tile = kv_tile;
        config.repeats = repeats;
        lab09::run(config, context.device, report);
      });
}
