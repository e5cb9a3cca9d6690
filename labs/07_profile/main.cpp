// Lab 07: where a training step's time goes. See README.md for the lesson.
#include <functional>
#include <vector>

#include "common/cli.h"
#include "common/files.h"
#include "experiment.h"

int main(int argc, char** argv) {
  lab07::Config flags;  // the values of the flags; only the flags given replace the defaults below
  flags.python = SPEEDLABS_DEFAULT_PYTHON;
  bool no_python = false;
  int batch = 0, seq = 0, top = 0, op_calls = 0, matmul_size = 0, stream_mib = 0, doc_kib = 0, prefetch = 0;
  std::vector<std::function<void(lab07::Config&)>> given;  // applies each flag given, after the presets
  const auto keep = [&](CLI::Option* option, std::function<void(lab07::Config&)> apply) {
    option->each([&given, apply](const std::string&) { given.push_back(apply); });
  };
  return speedlabs::run_lab(
      argc, argv, {"07", "07_profile", "where a training step's time goes: a trace, the cost of one op, the roofline, prefetching"},
      [&](CLI::App& app) {
        keep(app.add_option("--config", flags.model, "model size: tiny (default) or gpt2 (124M)")
                 ->check(CLI::IsMember({"gpt2", "tiny"})),
             [&](lab07::Config& c) { c.model = flags.model; });
        keep(speedlabs::add_int_flag(app, "--batch", batch, "B, sequences per batch (default 4 on a CPU, 16 on a GPU)"),
             [&](lab07::Config& c) { c.batch = batch; });
        keep(speedlabs::add_int_flag(app, "--seq", seq, "T, tokens per sequence (default 64 on a CPU, 256 on a GPU)"),
             [&](lab07::Config& c) { c.seq = seq; });
        keep(speedlabs::add_int_flag(app, "--warmup", flags.warmup, "steps before anything is measured", 0),
             [&](lab07::Config& c) { c.warmup = flags.warmup; });
        keep(speedlabs::add_int_flag(app, "--steps", flags.steps, "timed steps for the step time"),
             [&](lab07::Config& c) { c.steps = flags.steps; });
        keep(app.add_option("--trace", flags.trace_path, "write the profiled step's Chrome/Perfetto trace JSON here"),
             [&](lab07::Config& c) { c.trace_path = flags.trace_path; });
        keep(app.add_option("--plots", flags.plots_dir, "write lab07_top_ops.svg and lab07_roofline.svg here (gnuplot)"),
             [&](lab07::Config& c) { c.plots_dir = flags.plots_dir; });
        keep(speedlabs::add_int_flag(app, "--top", top, "ops shown and plotted, by self time"),
             [&](lab07::Config& c) { c.top = top; });
        keep(app.add_option("--python", flags.python, "Python with torch for the per-op cost")->capture_default_str(),
             [&](lab07::Config& c) { c.python = flags.python; });
        app.add_flag("--no-python", no_python, "measure the per-op cost in C++ only");
        keep(speedlabs::add_int_flag(app, "--op-calls", op_calls, "tiny ops per timed repeat"),
             [&](lab07::Config& c) { c.op_calls = op_calls; });
        keep(speedlabs::add_int_flag(app, "--matmul-size", matmul_size, "n of the matmul that measures the peak FLOP/s"),
             [&](lab07::Config& c) { c.matmul_size = matmul_size; });
        keep(speedlabs::add_int_flag(app, "--stream-mib", stream_mib, "MiB per array of the bandwidth copy and triad"),
             [&](lab07::Config& c) { c.stream_mib = stream_mib; });
        keep(speedlabs::add_int_flag(app, "--feed-steps", flags.feed_steps, "timed steps of each loader loop"),
             [&](lab07::Config& c) { c.feed_steps = flags.feed_steps; });
        keep(speedlabs::add_int_flag(app, "--doc-kib", doc_kib, "KiB of text tokenized per sequence by the loader"),
             [&](lab07::Config& c) { c.doc_kib = doc_kib; });
        keep(speedlabs::add_int_flag(app, "--prefetch", prefetch, "batches the prefetching loader keeps ready"),
             [&](lab07::Config& c) { c.prefetch = prefetch; });
        keep(app.add_option("--data-dir", flags.data_dir, "data directory (default: $SPEEDLABS_DATA_DIR, then <repo>/data)"),
             [&](lab07::Config& c) { c.data_dir = flags.data_dir; });
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab07::Config config = context.flags.quick ? lab07::quick_config() : lab07::Config{};
        if (context.device.is_cuda()) lab07::adapt_to_gpu(config);
        if (context.flags.quick && context.device.is_cuda()) config.matmul_size = 4096;
        config.python = SPEEDLABS_DEFAULT_PYTHON;
        for (const auto& apply : given) apply(config);
        if (no_python) config.python.clear();
        // A trace or chart that cannot be written is a usage error now, not after the run.
        if (!config.trace_path.empty()) speedlabs::require_writable(config.trace_path);
        lab07::run(config, context.device, report);
      });
}
