// Lab 04: measure before you believe. See README.md for the lesson.
#include "common/cli.h"
#include "experiment.h"

int main(int argc, char** argv) {
  int64_t batch = 0;
  int repeats = 0;
  int warmup = -1;
  return speedlabs::run_lab(
      argc, argv, {"04", "04_measure", "fp32 vs bf16 on CPU and GPU, the synchronize trap, warm-up, a CUDA kernel"},
      [&](CLI::App& app) {
        app.add_option("--batch", batch, "rows of the lesson's input (default 256)")
            ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));  // 65536 rows: a 512 MiB hidden layer
        app.add_option("--repeats", repeats, "measured calls per variant (default 20; --quick: 5)")
            ->check(CLI::Range(1, 100000));
        app.add_option("--warmup", warmup, "warm-up calls per variant (default 3; --quick: 1)")
            ->check(CLI::Range(0, 100000));
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab04::Config config = context.flags.quick ? lab04::quick_config() : lab04::Config{};
        if (batch > 0) config.batch = batch;
        if (repeats > 0) config.timing.repeats = repeats;
        if (warmup >= 0) config.timing.warmup = warmup;
        config.cpu_only = context.flags.device == "cpu";
        lab04::run(config, context.device, report);
      });
}
