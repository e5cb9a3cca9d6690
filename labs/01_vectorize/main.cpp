// Lab 01: vectorise first. See README.md for the lesson.
#include "common/cli.h"
#include "experiment.h"

int main(int argc, char** argv) {
  speedlabs::ConfigFlags<lab01::Config> flags;
  int repeats = flags.parsed().fast.repeats;
  return speedlabs::run_lab(
      argc, argv,
      {"01", "01_vectorize", "a loop vs vectorised code, same result, measured speed-up (runs on the CPU)", true},
      [&](CLI::App& app) {
        flags.option(app, "--n", &lab01::Config::n, "how many values (--quick: 100000)")
            ->check(CLI::Range(int64_t{1}, int64_t{1} << 31));
        flags.on_given(speedlabs::add_int_flag(app, "--repeats", repeats, "measured calls of each fast variant")
                           ->check(CLI::Range(1, 100000)),
                       [&](lab01::Config& config) { config.fast.repeats = repeats; });
        flags.on_given(speedlabs::add_seed_flag(app, flags.parsed().seed),
                       [&](lab01::Config& config) { config.seed = flags.parsed().seed; });
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab01::run(flags.configure(context, lab01::quick_config), report);
      });
}
