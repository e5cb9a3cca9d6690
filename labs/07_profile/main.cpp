// Lab 07: where a training step's time goes. See README.md for the lesson.
#include "common/build_paths.h"
#include "common/cli.h"
#include "common/files.h"
#include "common/process.h"
#include "experiment.h"

int main(int argc, char** argv) {
  using lab07::Config;
  speedlabs::ConfigFlags<Config> flags;
  flags.parsed().python = speedlabs::configured_python();
  bool no_python = false;
  return speedlabs::run_lab(
      argc, argv,
      {"07", "07_profile", "where a training step's time goes: a trace, the cost of one op, the roofline, prefetching"},
      [&](CLI::App& app) {
        flags.model_option(app, &Config::model);
        flags.int_option(app, "--batch", &Config::batch, "B, sequences per batch (16 on a GPU)");
        flags.int_option(app, "--seq", &Config::seq, "T, tokens per sequence (256 on a GPU)");
        flags.int_option(app, "--warmup", &Config::warmup, "steps before anything is measured", 0);
        flags.int_option(app, "--steps", &Config::steps, "timed steps for the step time");
        flags.option(app, "--trace", &Config::trace_path, "write the profiled step's Chrome/Perfetto trace JSON here");
        flags.option(app, "--plots", &Config::plots_dir,
                     "write lab07_top_ops.svg and lab07_roofline.svg here (gnuplot)");
        flags.int_option(app, "--top", &Config::top, "ops shown and plotted, by self time");
        flags.option(app, "--python", &Config::python, "Python with torch for the per-op cost");
        app.add_flag("--no-python", no_python, "measure the per-op cost in C++ only");
        flags.int_option(app, "--op-calls", &Config::op_calls, "tiny ops per timed repeat");
        flags.int_option(app, "--matmul-size", &Config::matmul_size,
                         "n of the matmul that measures the peak FLOP/s (8192 on a GPU)");
        flags.int_option(app, "--stream-mib", &Config::stream_mib, "MiB per array of the bandwidth copy and triad");
        flags.int_option(app, "--feed-steps", &Config::feed_steps, "timed steps of each loader loop");
        flags.int_option(app, "--doc-kib", &Config::doc_kib, "KiB of text tokenized per sequence by the loader");
        flags.int_option(app, "--prefetch", &Config::prefetch, "batches the prefetching loader keeps ready");
        flags.data_dir_option(app, &Config::data_dir);
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        Config config = flags.configure(context, lab07::quick_config, [](Config& base, const auto& context) {
          if (context.device.is_cuda()) lab07::adapt_to_gpu(base);
          if (context.flags.quick && context.device.is_cuda()) base.matmul_size = 4096;
          base.python = speedlabs::configured_python();
        });
        if (no_python) config.python.clear();
        if (!config.python.empty()) speedlabs::require_program(config.python, "--python");
        // A Python that cannot run, a trace or chart that cannot be written: usage errors now, not after the run.
        if (!config.trace_path.empty()) speedlabs::require_writable(config.trace_path);
        if (!config.plots_dir.empty()) speedlabs::require_output_folder(config.plots_dir);
        lab07::run(config, context.device, report);
      });
}
