// Lab 11: sharded training (ZeRO stages 0-3) on lab 10's MPI workers. See README.md for the lesson.
//
// One program, two roles, as in lab 10: started by a person (./lab run 11), it is the launcher, which starts
// the workers with mpirun and judges what they measured; started by mpirun with --worker, it is a worker.
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "common/cli.h"
#include "common/errors.h"
#include "common/files.h"
#include "experiment.h"
#include "zero.h"

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--worker") == 0) return lab11::worker_main(argc, argv, argv[2]);
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr) {
    std::cerr << "lab11: error: started by mpirun, but lab11 starts its own workers: run ./lab run 11 --workers N\n";
    return speedlabs::kExitUsage;
  }
  using lab11::Config;
  speedlabs::ConfigFlags<Config> flags;
  return speedlabs::run_lab(
      argc, argv,
      {"11", "11_sharding", "sharded training, ZeRO stages 0-3: the same losses as one worker, 1/N of the state per worker"},
      [&](CLI::App& app) {
        flags.int_option(app, "--workers", &Config::workers, "N, worker processes (each with one thread)", 2);
        flags.option(app, "--stage", &Config::stage, "ZeRO stage 0, 1, 2 or 3 (stage 0 runs too, the baseline), or all")
            ->check(CLI::IsMember({"0", "1", "2", "3", "all"}));
        flags.option(app, "--config", &Config::model, "model size: tiny (CPU-friendly) or gpt2 (124M)")
            ->check(CLI::IsMember({"tiny", "gpt2"}));
        flags.int_option(app, "--batch", &Config::batch, "B, the global batch (a multiple of --workers)");
        flags.int_option(app, "--seq", &Config::seq, "T, tokens per sequence");
        flags.int_option(app, "--steps", &Config::steps, "training steps per stage (at least 3)");
        flags.option(app, "--hostfile", &Config::hostfile, "an mpirun host file: run the workers on several machines")
            ->check(CLI::ExistingFile);
        flags.option(app, "--plots", &Config::plots_dir, "write lab11_bytes_per_worker.svg here (gnuplot)");
        flags.option(app, "--data-dir", &Config::data_dir, "data directory (default: $SPEEDLABS_DATA_DIR, then <repo>/data)");
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        Config config = flags.apply(context.flags.quick ? lab11::quick_config() : Config{});
        config.device = context.device.is_cuda() ? "cuda" : "cpu";  // cuda: NCCL between the GPUs
        if (!config.plots_dir.empty()) speedlabs::require_output_folder(config.plots_dir);
        lab11::run(config, report);
      });
}
