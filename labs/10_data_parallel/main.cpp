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
  lab10::Config config;
  CLI::Option* steps_flag = nullptr;
  CLI::Option* batch_flag = nullptr;
  CLI::Option* seq_flag = nullptr;
  int batch = static_cast<int>(config.batch);
  int seq = static_cast<int>(config.seq);
  return speedlabs::run_lab(
      argc, argv,
      {"10", "10_data_parallel", "data-parallel training on MPI workers: the same losses as one worker, faster",
       /*cpu_only=*/true},
      [&](CLI::App& app) {
        speedlabs::add_int_flag(app, "--workers", config.workers, "N, worker processes (each with one thread)", 2);
        app.add_option("--config", config.model, "model size: tiny (CPU-friendly) or gpt2 (124M)")
            ->check(CLI::IsMember({"tiny", "gpt2"}))
            ->capture_default_str();
        batch_flag = speedlabs::add_int_flag(app, "--batch", batch, "B, the global batch (a multiple of --workers)");
        seq_flag = speedlabs::add_int_flag(app, "--seq", seq, "T, tokens per sequence");
        steps_flag = speedlabs::add_int_flag(app, "--steps", config.steps, "training steps per mode");
        speedlabs::add_number_flag(app, "--bucket-mb", config.bucket_mb,
                                   "gradient bucket size in MiB (PyTorch DDP's default: 25)");
        speedlabs::add_int_flag(app, "--micro-batches", config.micro_batches,
                                "K of the gradient-accumulation check (must divide --batch)");
        app.add_option("--hostfile", config.hostfile, "an mpirun host file: run the workers on several machines")
            ->check(CLI::ExistingFile);
        app.add_option("--data-dir", config.data_dir, "data directory (default: $SPEEDLABS_DATA_DIR, then <repo>/data)");
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        if (context.flags.quick) {
          // --quick picks small defaults; flags given explicitly still win.
          const lab10::Config quick = lab10::quick_config();
          if (!batch_flag->count()) batch = static_cast<int>(quick.batch);
          if (!seq_flag->count()) seq = static_cast<int>(quick.seq);
          if (!steps_flag->count()) config.steps = quick.steps;
        }
        config.batch = batch;
        config.seq = seq;
        lab10::run(config, report);
      });
}
