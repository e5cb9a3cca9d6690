// Lab 11: sharded training (ZeRO stages 0-3) on lab 10's MPI workers. See README.md for the lesson.
//
// One program, two roles, as in lab 10: started by a person (./lab run 11), it is the launcher, which starts
// the workers with mpirun and judges what they measured; started by mpirun with --worker, it is a worker.
#include "common/cli.h"
#include "common/files.h"
#include "common/workers/job_flags.h"
#include "experiment.h"
#include "zero.h"

int main(int argc, char** argv) {
  if (const auto code =
          speedlabs::workers::worker_role(argc, argv, "lab11", "./lab run 11 --workers N", lab11::worker_main)) {
    return *code;
  }
  using lab11::Config;
  speedlabs::ConfigFlags<Config> flags;
  return speedlabs::run_lab(
      argc, argv,
      {"11", "11_sharding",
       "sharded training, ZeRO stages 0-3: the same losses as one worker, 1/N of the state per worker"},
      [&](CLI::App& app) {
        speedlabs::workers::add_workers_flag(app, flags);
        flags
            .option(app, "--stage", &Config::stage, "ZeRO stage 0, 1, 2 or 3 (stage 0 runs too, the baseline), or all")
            ->check(CLI::IsMember({"0", "1", "2", "3", "all"}));
        speedlabs::workers::add_job_size_flags(app, flags, "training steps per stage (at least 3)");
        speedlabs::workers::add_hostfile_flag(app, flags);
        flags.option(app, "--plots", &Config::plots_dir, "write lab11_bytes_per_worker.svg here (gnuplot)");
        flags.data_dir_option(app, &Config::data_dir);
      },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        Config config = flags.configure(context, lab11::quick_config);
        config.device = context.device.is_cuda() ? "cuda" : "cpu";  // cuda: NCCL between the GPUs
        if (!config.plots_dir.empty()) speedlabs::require_output_folder(config.plots_dir);
        lab11::run(config, report);
      });
}
