// Lab 10 on GPUs: two workers, each on its own GPU, the gradients over NCCL. Skipped without the NCCL path
// (a CPU libtorch) or without two GPUs: NCCL puts one worker on one GPU.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/types.h>

#include "common/build_paths.h"
#include "common/observations.h"
#include "experiment.h"
#include "tests/support/data.h"

namespace {

using speedlabs::Verdict;

TEST(Lab10Gpu, TwoNcclWorkersGiveTheLossesOfOneAndStayInSync) {
#ifndef SPEEDLABS_NCCL
  GTEST_SKIP() << "this build has no NCCL path (a CPU libtorch, or no nccl.h beside the CUDA one)";
#else
  if (torch::cuda::device_count() < 2) GTEST_SKIP() << "NCCL needs a GPU per worker: fewer than 2 GPUs here";
  SPEEDLABS_REQUIRE_DATA();
  lab10::Config config = lab10::quick_config();
  config.worker_program = speedlabs::program_path("lab10");
  config.timeout_s = 300;
  config.device = "cuda";
  speedlabs::Report report("10_data_parallel", "cuda");
  lab10::run(config, report);
  for (const char* id : {"workers_agree_at_start", "same_losses_as_one_worker", "weights_stay_in_sync",
                         "bucketed_same_losses_as_naive"}) {
    EXPECT_EQ(report.at(id).verdict, Verdict::holds) << id << ": " << report.at(id).measured.dump();
  }
#endif
}

}  // namespace
