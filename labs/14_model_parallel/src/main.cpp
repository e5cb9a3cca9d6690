// Lab 14: the model split over MPI workers, by its matrices (tensor parallelism) and by its blocks (a pipeline).
// See README.md for the lesson.
//
// One program, two roles, as in labs 10 and 11: started by a person (./lab run 14), it is the launcher, which
// starts the workers with mpirun and judges what they measured; started by mpirun with --worker, it is a worker.
#include "common/cli.h"
#include "common/files.h"
#include "common/workers/job_flags.h"
#include "experiment.h"
#include "worker.h"

int main(int argc, char** argv) {
  if (const auto code =
          speedlabs::workers::worker_role(argc, argv, "lab14", "./lab run 14 --tp N --pp N", lab14::worker_main)) {
    return *code;
  }
  speedlabs::Knobs<lab14::Config> knobs = lab14::knobs();
  return speedlabs::run_lab(
      argc, argv,
      {"14", "14_model_parallel",
       "the model split over workers: tensor parallelism and a pipeline, the same losses as one worker", true},
      [&](CLI::App& app) { knobs.add_flags(app); },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        lab14::Config config = knobs.configure(context);
        if (!config.plots_dir.empty()) speedlabs::require_output_folder(config.plots_dir);
        lab14::run(config, report);
      });
}
