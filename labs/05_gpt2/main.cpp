// Lab 05: GPT-2 on tiny shakespeare in fp32, tf32, bf16 and fp16. See README.md for the lesson.
#include <cmath>
#include <cstdlib>

#include "common/cli.h"
#include "common/precision.h"
#include "experiment.h"

int main(int argc, char** argv) {
  lab05::Config config;
  std::string precision = "fp32";
  CLI::Option* precision_flag = nullptr;
  CLI::Option* config_flag = nullptr;
  CLI::Option* steps_flag = nullptr;
  CLI::Option* seq_flag = nullptr;
  int steps = config.steps;
  int batch = static_cast<int>(config.batch);
  int seq = static_cast<int>(config.seq);
  return speedlabs::run_lab(
      argc, argv, {"05", "05_gpt2", "GPT-2 on tiny shakespeare in fp32, tf32, bf16 and fp16: speed and loss"},
      [&](CLI::App& app) {
        precision_flag = app.add_option("--precision", precision, "fp32, tf32, bf16, fp16, or all (one after the other)")
                             ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16", "all"}))
                             ->capture_default_str();
        config_flag = app.add_option("--config", config.model, "model size: gpt2 (124M) or tiny (CPU-friendly)")
                          ->check(CLI::IsMember({"gpt2", "tiny"}))
                          ->capture_default_str();
        steps_flag = speedlabs::add_int_flag(app, "--steps", steps, "training steps per mode");
        speedlabs::add_int_flag(app, "--batch", batch, "B, sequences per batch");
        seq_flag = speedlabs::add_int_flag(app, "--seq", seq, "T, tokens per sequence (at most the model's block size)");
        speedlabs::add_number_flag(app, "--lr", config.lr, "AdamW learning rate");
        app.add_option("--csv", config.csv_path, "write every step's loss and time to this CSV file");
        app.add_option("--plots", config.plots_dir, "write lab05_loss.svg and lab05_tokens_per_s.svg here (gnuplot)");
        app.add_option("--data-dir", config.data_dir,
                       "data directory (default: $SPEEDLABS_DATA_DIR, then <repo>/data)");
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        if (context.flags.quick) {
          // --quick picks small defaults; flags given explicitly still win.
          const lab05::Config quick = lab05::quick_config();
          if (!config_flag->count()) config.model = quick.model;
          if (!steps_flag->count()) steps = quick.steps;
          if (!seq_flag->count()) seq = static_cast<int>(quick.seq);
          if (!precision_flag->count()) precision = "all";
        }
        config.steps = steps;
        config.batch = batch;
        config.seq = seq;
        config.modes = precision == "all" ? speedlabs::all_precisions()
                                          : std::vector<speedlabs::Precision>{speedlabs::parse_precision(precision)};
        lab05::run(config, context.device, report);
      });
}
