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
  speedlabs::Knobs<lab11::Config> knobs = lab11::knobs();
  return speedlabs::run_lab(
      argc, argv,
      {"11", "11_sharding",
       "sharded training, ZeRO stages 0-3: the same losses as one worker, 1/N of the state per worker"},
      [&](CLI::App& app) { knobs.add_flags(app); },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab11::Config config = knobs.configure(context);
        config.device = context.device.is_cuda() ? "cuda" : "cpu";  // cuda: NCCL between the GPUs
        if (!config.plots_dir.empty()) speedlabs::require_output_folder(config.plots_dir);
        lab11::run(config, report);
      });
}
