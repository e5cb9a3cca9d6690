// Lab 07: where a training step's time goes. See README.md for the lesson.
#include <cstdlib>

#include "common/build_paths.h"
#include "common/cli.h"
#include "common/files.h"
#include "common/process.h"
#include "experiment.h"

int main(int argc, char** argv) {
  // libkineto, the profiler's engine, prints a line at every profiler start and stop (about a hundred in a --quick
  // run). Its levels put those lines above its errors, so only level 6 quiets them; the lab checks every trace it
  // reads, so a profiler that failed still shows, as a failed observation. A level the reader set is kept.
  setenv("KINETO_LOG_LEVEL", "6", /*overwrite=*/0);
  speedlabs::Knobs<lab07::Config> knobs = lab07::knobs();
  knobs.base().python = speedlabs::configured_python();
  bool no_python = false;
  return speedlabs::run_lab(
      argc, argv,
      {"07", "07_profile", "where a training step's time goes: a trace, the cost of one op, the roofline, prefetching"},
      [&](CLI::App& app) {
        knobs.add_flags(app);
        app.add_flag("--no-python", no_python, "measure the per-op cost in C++ only");
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab07::Config config = knobs.configure(context);
        if (no_python) config.python.clear();
        if (!config.python.empty()) speedlabs::require_program(config.python, "--python");
        // A Python that cannot run, a trace or chart that cannot be written: usage errors now, not after the run.
        if (!config.trace_path.empty()) speedlabs::require_writable(config.trace_path);
        if (!config.plots_dir.empty()) speedlabs::require_output_folder(config.plots_dir);
        lab07::run(config, context.device, report);
      });
}
