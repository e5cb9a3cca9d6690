// Lab 11 graded tests (./lab check 11): the shard bookkeeping, the sharded AdamW step and stage 3's gather /
// release of exercise.h. Suite Lab11_<function> grades that function: first in one process (against libtorch's
// AdamW, or a recording communicator), then, for the gather, for real with 2 MPI workers.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "common/build_paths.h"
#include "common/errors.h"
#include "exercise.h"
#include "experiment.h"
#include "tests/common/workers/recording_communicator.h"
#include "tests/support/data.h"
#include "tests/support/expect.h"
#include "tests/support/mpi_jobs.h"
#include "zero.h"

namespace {

using speedlabs::testing::numbers_close;
using speedlabs::testing::tensors_close;
using speedlabs::workers::testing::RecordingCommunicator;

TEST(Lab11_shard_range, PadsToAMultipleOfTheWorkersAndGivesEachItsSlice) {
  const auto r0 = lab11::shard_range(10, 0, 4), r3 = lab11::shard_range(10, 3, 4);
  EXPECT_EQ(r0.padded, 12) << "10 elements over 4 workers are padded to 12";
  EXPECT_EQ(r0.shard_size, 3) << "12 / 4";
  EXPECT_EQ(r0.numel, 10);
  EXPECT_EQ(r0.begin, 0);
  EXPECT_EQ(r0.end, 3);
  EXPECT_EQ(r3.begin, 9) << "worker 3 starts at 3 x 3";
  EXPECT_EQ(r3.end, 10) << "worker 3's real elements end at numel: the rest of its shard is padding";
  const auto even = lab11::shard_range(8, 1, 2);
  EXPECT_EQ(even.padded, 8) << "no padding when the workers divide the buffer";
  EXPECT_EQ(even.begin, 4);
  EXPECT_EQ(even.end, 8);
}

TEST(Lab11_shard_range, AShardOfPaddingOnlyEndsWhereItBegins) {
  const auto r = lab11::shard_range(1, 3, 4);  // 1 element over 4 workers: workers 1-3 hold padding only
  EXPECT_EQ(r.padded, 4);
  EXPECT_EQ(r.begin, 3);
  EXPECT_EQ(r.end, 3) << "end is never below begin";
}

TEST(Lab11_shard_range, RejectsWhatCannotBeSplit) {
  EXPECT_THROW(lab11::shard_range(10, 2, 2), speedlabs::UsageError) << "rank 2 of 2 workers";
  EXPECT_THROW(lab11::shard_range(10, 0, 0), speedlabs::UsageError) << "0 workers";
  EXPECT_THROW(lab11::shard_range(-1, 0, 2), speedlabs::UsageError) << "a negative size";
}

// Three AdamW steps on a 2-D weight with libtorch's optimizer, against sharded_adamw_step on each half of it.
TEST(Lab11_sharded_adamw_step, TwoShardsStepLikeLibtorchsAdamWOnTheWhole) {
  torch::manual_seed(3);
  const auto start = torch::randn({6, 5});
  auto whole = start.clone().requires_grad_();
  torch::optim::AdamW adamw({whole}, torch::optim::AdamWOptions(1e-2).betas({0.9, 0.999}).eps(1e-8).weight_decay(0.01));
  auto flat = start.clone().reshape(-1);
  lab11::AdamWShard state0, state1;
  lab11::AdamWSettings settings;
  settings.lr = 1e-2;
  for (int step = 0; step < 3; ++step) {
    const auto grad = torch::randn({6, 5});
    whole.mutable_grad() = grad.clone();
    adamw.step();
    lab11::sharded_adamw_step(flat.narrow(0, 0, 15), grad.reshape(-1).narrow(0, 0, 15), state0, settings);
    lab11::sharded_adamw_step(flat.narrow(0, 15, 15), grad.reshape(-1).narrow(0, 15, 15), state1, settings);
    ASSERT_TRUE(tensors_close(flat.view({6, 5}), whole.detach(), 1e-7, 1e-6,
                              "the two shards after step " + std::to_string(step) + " (libtorch's AdamW is expected)"));
  }
  EXPECT_EQ(state0.step, 3) << "the step count";
  ASSERT_TRUE(state0.exp_avg.defined() && state0.exp_avg_sq.defined()) << "the moments are made on the first step";
  EXPECT_EQ(state0.exp_avg.numel(), 15) << "a shard's moments are as long as the shard, not the whole weight";
}

TEST(Lab11_sharded_adamw_step, PaddingStaysZero) {
  auto shard = torch::zeros({4});
  lab11::AdamWShard state;
  lab11::sharded_adamw_step(shard, torch::zeros({4}), state, {});
  EXPECT_TRUE(tensors_close(shard, torch::zeros({4}), 0, 0, "a shard of padding with a zero gradient"));
}

// A unit of 5 elements over 2 workers (padded to 6), this worker rank 0, as zero.cpp makes it at stage 3.
lab11::FlatUnit stage3_unit(std::vector<torch::Tensor>& params) {
  params = {torch::arange(3, torch::kFloat).requires_grad_(), torch::arange(3, 5, torch::kFloat).requires_grad_()};
  lab11::FlatUnit unit;
  unit.params = params;
  unit.offsets = {0, 3};
  unit.range = lab11::shard_range(5, 0, 2);
  unit.full = torch::zeros({unit.range.padded});
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      unit.full.narrow(0, unit.offsets[i], params[i].numel()).copy_(params[i]);
      params[i].set_data(unit.full.narrow(0, unit.offsets[i], params[i].numel()));
    }
  }
  unit.shard = unit.full.narrow(0, 0, 3).clone();
  lab11::release_full_storage(unit.full);
  return unit;
}

TEST(Lab11_gather_full_parameters, FillsTheFullBufferFromEveryWorkersShard) {
  RecordingCommunicator comm(/*size=*/2, /*peer_factor=*/10.0);  // the other worker's slice: 10 x ours
  std::vector<torch::Tensor> params;
  auto unit = stage3_unit(params);
  lab11::gather_full_parameters(unit, comm);
  ASSERT_TRUE(lab11::has_full_storage(unit.full)) << "the full buffer must get its bytes back (allocate_full_storage)";
  ASSERT_EQ(comm.gathered.size(), 1u) << "one all_gather_into per gather";
  EXPECT_TRUE(tensors_close(comm.gathered[0], torch::tensor({0.f, 1.f, 2.f}), 0, 0,
                            "what this worker sent: its shard, in its slice of full"));
  EXPECT_TRUE(tensors_close(unit.full, torch::tensor({0.f, 1.f, 2.f, 0.f, 10.f, 20.f}), 0, 0, "the gathered unit"));
  EXPECT_TRUE(tensors_close(params[1].detach(), torch::tensor({0.f, 10.f}), 0, 0,
                            "parameter 1, a view of full: its values come from the gather"));
}

// Two MPI workers at stage 3 give one worker's losses: every block's weights gathered before its forward
// and its backward, released after.
TEST(Lab11_gather_full_parameters, TwoMpiWorkersAtStage3GiveTheLossesOfOne) {
  SPEEDLABS_REQUIRE_DATA();
  lab11::Config config = speedlabs::testing::mpi_test_config(lab11::quick_config(), speedlabs::program_path("lab11"));
  config.steps = 4;
  config.stage = "3";
  speedlabs::Report report("11_sharding", "cpu");
  lab11::run(config, report);
  const auto& losses = report.at("same_losses_as_one_worker");
  EXPECT_EQ(losses.verdict, speedlabs::Verdict::holds) << losses.measured.dump();
  EXPECT_EQ(report.at("parameter_bytes_at_rest_per_worker").verdict, speedlabs::Verdict::holds)
      << "a gathered unit must be freed again: " << report.at("parameter_bytes_at_rest_per_worker").measured.dump();
}

TEST(Lab11_free_full_parameters, GivesTheFullBuffersBytesBackAndKeepsTheShard) {
  RecordingCommunicator comm(2, 10.0);
  std::vector<torch::Tensor> params;
  auto unit = stage3_unit(params);
  lab11::gather_full_parameters(unit, comm);
  lab11::free_full_parameters(unit);
  EXPECT_FALSE(lab11::has_full_storage(unit.full)) << "after the release the full buffer holds no bytes";
  EXPECT_EQ(unit.full.numel(), 6) << "the buffer keeps its shape";
  EXPECT_TRUE(tensors_close(unit.shard, torch::tensor({0.f, 1.f, 2.f}), 0, 0, "the shard stays"));
  lab11::gather_full_parameters(unit, comm);  // and a gather after it brings the values back
  EXPECT_TRUE(
      tensors_close(params[0].detach(), torch::tensor({0.f, 1.f, 2.f}), 0, 0, "parameter 0 after a new gather"));
}

}  // namespace
