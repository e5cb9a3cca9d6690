// Lab 01: vectorise first. See README.md for the lesson.
#include "common/cli.h"
#include "experiment.h"

int main(int argc, char** argv) {
  lab01::Config config;
  int64_t n = 0;
  int repeats = 0;
  return speedlabs::run_lab(
      argc, argv, {"01", "01_vectorize", "a loop vs vectorised code, same result, measured speed-up (runs on the CPU)", true},
      [&](CLI::App& app) {
        app.add_option("--n", n, "how many values (default 1000000; --quick: 100000)")
            ->check(CLI::Range(int64_t{1}, int64_t{1} << 31));
        app.add_option("--repeats", repeats, "measured calls of each fast variant (default 20)")
            ->check(CLI::Range(1, 100000));
        speedlabs::add_seed_flag(app, config.seed);
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        const uint64_t seed = config.seed;
        if (context.flags.quick) config = lab01::quick_config();
        config.seed = seed;
        if (n > 0) config.n = n;
        if (repeats > 0) config.fast.repeats = repeats;
        lab01::run(config, report);
      });
}
