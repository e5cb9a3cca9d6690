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
  speedlabs::Knobs<lab10::Config> knobs = lab10::knobs();
  return speedlabs::run_lab(
      argc, argv,
      {"10", "10_data_parallel", "data-parallel training on MPI workers: the same losses as one worker, faster"},
      [&](CLI::App& app) { knobs.add_flags(app); },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab10::Config config = knobs.configure(context);
        config.device = context.device.is_cuda() ? "cuda" : "cpu";  // cuda: NCCL between the GPUs
        lab10::run(config, report);
      });
}
