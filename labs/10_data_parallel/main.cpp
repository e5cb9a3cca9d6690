// Lab 10: data-parallel training on MPI workers. See README.md for the lesson.
//
// One program, two roles: started by a person (./lab run 10), it is the launcher, which starts the
// workers with mpirun and judges what they measured; started by mpirun with --worker, it is a worker.
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "common/cli.h"
#include "common/errors.h"
#include "experiment.h"
#include "worker.h"

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--worker") == 0) return lab10::worker_main(argc, argv, argv[2]);
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr) {
    std::cerr << "lab10: error: started by mpirun, but lab10 starts its own workers: run ./lab run 10 --workers N "
                 "(and --hostfile FILE for several machines)\n";
    return speedlabs::kExitUsage;
  }
  using lab10::Config;
  speedlabs::ConfigFlags<Config> flags;
  return speedlabs::run_lab(
      argc, argv,
      {"10", "10_data_parallel", "data-parallel training on MPI workers: the same losses as one worker, faster"},
      [&](CLI::App& app) {
        flags.int_option(app, "--workers", &Config::workers, "N, worker processes (each with one thread)", 2);
        flags.option(app, "--config", &Config::model, "model size: tiny (CPU-friendly) or gpt2 (124M)")
            ->check(CLI::IsMember({"tiny", "gpt2"}));
        flags.int_option(app, "--batch", &Config::batch, "B, the global batch (a multiple of --workers)");
        flags.int_option(app, "--seq", &Config::seq, "T, tokens per sequence");
        flags.int_option(app, "--steps", &Config::steps, "training steps per mode");
        flags.number_option(app, "--bucket-mb", &Config::bucket_mb, "gradient bucket size in MiB (PyTorch DDP's default: 25)");
        flags.int_option(app, "--micro-batches", &Config::micro_batches,
                         "K of the gradient-accumulation check (must divide --batch)");
        flags.option(app, "--hostfile", &Config::hostfile, "an mpirun host file: run the workers on several machines")
            ->check(CLI::ExistingFile);
        flags.option(app, "--data-dir", &Config::data_dir, "data directory (default: $SPEEDLABS_DATA_DIR, then <repo>/data)");
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        Config config = flags.apply(context.flags.quick ? lab10::quick_config() : Config{});
        config.device = context.device.is_cuda() ? "cuda" : "cpu";  // cuda: NCCL between the GPUs
        lab10::run(config, report);
      });
}
