// Lab 03: mixed precision with autocast and a GradScaler. See README.md for the lesson.
#include "common/cli.h"
#include "experiment.h"

int main(int argc, char** argv) {
  speedlabs::ConfigFlags<lab03::Config> flags;
  std::string dtype = "bf16";
  return speedlabs::run_lab(
      argc, argv, {"03", "03_mixed_precision", "autocast's per-op policy, loss scaling, mixed-precision training"},
      [&](CLI::App& app) {
        flags.on_given(app.add_option("--dtype", dtype, "autocast dtype for the dtype checks and the policy table")
                           ->check(CLI::IsMember({"bf16", "fp16"}))
                           ->capture_default_str(),
                       [&](lab03::Config& config) { config.dtype = dtype == "fp16" ? c10::kHalf : c10::kBFloat16; });
        flags.option(app, "--steps", &lab03::Config::steps, "training steps per run (--quick: 60)")
            ->check(CLI::Range(1, 100000));
        flags.on_given(speedlabs::add_seed_flag(app, flags.parsed().seed),
                       [&](lab03::Config& config) { config.seed = flags.parsed().seed; });
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab03::run(flags.configure(context, lab03::quick_config,
                                   [](lab03::Config& config, const speedlabs::LabContext& context) {
                                     config.device = context.device;
                                   }),
                   report);
      });
}
