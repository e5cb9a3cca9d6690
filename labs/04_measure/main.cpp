// Lab 04: measure before you believe. See README.md for the lesson.
#include "common/cli.h"
#include "experiment.h"

int main(int argc, char** argv) {
  speedlabs::ConfigFlags<lab04::Config> flags;
  int repeats = flags.parsed().timing.repeats, warmup = flags.parsed().timing.warmup;
  return speedlabs::run_lab(
      argc, argv, {"04", "04_measure", "fp32 vs bf16 on CPU and GPU, the synchronize trap, warm-up, a CUDA kernel"},
      [&](CLI::App& app) {
        flags.option(app, "--batch", &lab04::Config::batch, "rows of the lesson's input")
            ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));  // 65536 rows: a 512 MiB hidden layer
        flags.on_given(speedlabs::add_int_flag(app, "--repeats", repeats, "measured calls per variant (--quick: 5)")
                           ->check(CLI::Range(1, 100000)),
                       [&](lab04::Config& config) { config.timing.repeats = repeats; });
        flags.on_given(speedlabs::add_int_flag(app, "--warmup", warmup, "warm-up calls per variant (--quick: 1)", 0)
                           ->check(CLI::Range(0, 100000)),
                       [&](lab04::Config& config) { config.timing.warmup = warmup; });
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab04::Config config = flags.configure(context, lab04::quick_config);
        config.cpu_only = context.flags.device == "cpu";
        lab04::run(config, context.device, report);
      });
}
