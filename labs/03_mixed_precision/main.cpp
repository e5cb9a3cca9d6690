// Lab 03: mixed precision with autocast and a GradScaler. See README.md for the lesson.
#include "common/cli.h"
#include "experiment.h"

int main(int argc, char** argv) {
  std::string dtype = "bf16";
  int steps = 0;
  uint64_t seed = 0;
  return speedlabs::run_lab(
      argc, argv, {"03", "03_mixed_precision", "autocast's per-op policy, loss scaling, mixed-precision training"},
      [&](CLI::App& app) {
        app.add_option("--dtype", dtype, "autocast dtype for the dtype checks and the policy table")
            ->check(CLI::IsMember({"bf16", "fp16"}))
            ->capture_default_str();
        app.add_option("--steps", steps, "training steps per run (default 200; --quick: 60)")
            ->check(CLI::Range(1, 100000));
        speedlabs::add_seed_flag(app, seed);
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab03::Config config = context.flags.quick ? lab03::quick_config(context.device) : lab03::Config{};
        config.device = context.device;
        config.dtype = dtype == "fp16" ? c10::kHalf : c10::kBFloat16;
        config.seed = seed;
        if (steps > 0) config.steps = steps;
        lab03::run(config, report);
      });
}
