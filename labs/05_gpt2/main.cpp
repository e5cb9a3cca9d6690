// Lab 05: GPT-2 on tiny shakespeare in fp32, tf32, bf16 and fp16. See README.md for the lesson.
#include "common/cli.h"
#include "common/precision.h"
#include "experiment.h"

int main(int argc, char** argv) {
  speedlabs::ConfigFlags<lab05::Config> flags;
  std::string precision = "fp32";
  std::vector<std::string> precision_choices = speedlabs::precision_names().names();
  precision_choices.push_back("all");
  return speedlabs::run_lab(
      argc, argv, {"05", "05_gpt2", "GPT-2 on tiny shakespeare in fp32, tf32, bf16 and fp16: speed and loss"},
      [&](CLI::App& app) {
        flags.on_given(
            app.add_option("--precision", precision, "fp32, tf32, bf16, fp16, or all (side by side, step by step)")
                ->check(CLI::IsMember(precision_choices))
                ->capture_default_str(),
            [&](lab05::Config& config) {
              config.modes =
                  precision == "all" ? speedlabs::all_precisions() : std::vector{speedlabs::parse_precision(precision)};
            });
        flags.model_option(app, &lab05::Config::model);
        flags.int_option(app, "--steps", &lab05::Config::steps, "training steps per mode");
        flags.int_option(app, "--batch", &lab05::Config::batch, "B, sequences per batch");
        flags.int_option(app, "--seq", &lab05::Config::seq, "T, tokens per sequence (at most the model's block size)");
        flags.number_option(app, "--lr", &lab05::Config::lr, "AdamW learning rate");
        flags.option(app, "--csv", &lab05::Config::csv_path, "write every step's loss and time to this CSV file");
        flags.option(app, "--plots", &lab05::Config::plots_dir,
                     "write lab05_loss.svg and lab05_tokens_per_s.svg here (gnuplot)");
        flags.data_dir_option(app, &lab05::Config::data_dir);
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab05::run(flags.configure(context, lab05::quick_config), context.device, report);
      });
}
