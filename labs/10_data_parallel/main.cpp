// Lab 10: data-parallel training on MPI workers. See README.md for the lesson.
//
// One program, two roles: started by a person (./lab run 10), it is the launcher, which starts the
// workers with mpirun and judges what they measured; started by mpirun with --worker, it is a worker.
#include "common/cli.h"
#include "common/workers/job_flags.h"
#include "experiment.h"
#include "worker.h"

int main(int argc, char** argv) {
  if (const auto code = speedlabs::workers::worker_role(
          argc, argv, "lab10", "./lab run 10 --workers N (and --hostfile FILE for several machines)",
          lab10::worker_main)) {
    return *code;
  }
  using lab10::Config;
  speedlabs::ConfigFlags<Config> flags;
  return speedlabs::run_lab(
      argc, argv,
      {"10", "10_data_parallel", "data-parallel training on MPI workers: the same losses as one worker, faster"},
      [&](CLI::App& app) {
        speedlabs::workers::add_workers_flag(app, flags);
        speedlabs::workers::add_job_size_flags(app, flags, "training steps per mode");
        flags.number_option(app, "--bucket-mb", &Config::bucket_mb,
                            "gradient bucket size in MiB (PyTorch DDP's default: 25)");
        flags.int_option(app, "--micro-batches", &Config::micro_batches,
                         "K of the gradient-accumulation check (must divide --batch)");
        speedlabs::workers::add_hostfile_flag(app, flags);
        flags.data_dir_option(app, &Config::data_dir);
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        Config config = flags.configure(context, lab10::quick_config);
        config.device = context.device.is_cuda() ? "cuda" : "cpu";  // cuda: NCCL between the GPUs
        lab10::run(config, report);
      });
}
