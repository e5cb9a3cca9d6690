// Lab 10 graded tests (./lab check 10): the bucketed, overlapped gradient all-reduce of exercise.h.
// Suite Lab10_<function> grades that function: first in one process against a recording communicator
// (what is copied where, when each all-reduce starts, what the wait hands the optimizer), then for
// real, with 2 MPI workers on the loopback interface; Lab10_on_gradient_ready_speed times the bucketed
// step against the naive one.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/contention.h"
#include "common/timer.h"

#include "buckets.h"
#include "common/errors.h"
#include "datasets/data_files.h"
#include "exercise.h"
#include "experiment.h"
#include "tests/common/workers/recording_communicator.h"
#include "tests/lab10/graded_job.h"
#include "tests/lab10/speed_rules.h"
#include "tests/support/data.h"
#include "tests/support/expect.h"
#include "tests/support/speed.h"

namespace {

using lab10::GradientBuckets;
using speedlabs::testing::graded_job_config;
using speedlabs::testing::numbers_close;
using speedlabs::testing::tensors_close;
using speedlabs::workers::testing::RecordingCommunicator;

// Three parameters of 6, 4 and 5 elements in buckets of at most 10 floats (40 bytes): backward order is
// 2, 1, 0, so bucket 0 holds parameters 2 (offset 0) and 1 (offset 5), bucket 1 holds parameter 0.
std::vector<torch::Tensor> three_params() {
  return {torch::zeros({2, 3}).requires_grad_(), torch::zeros({4}).requires_grad_(),
          torch::zeros({5}).requires_grad_()};
}
std::vector<torch::Tensor> three_grads() {
  torch::manual_seed(0);
  return {torch::randn({2, 3}), torch::randn({4}), torch::randn({5})};
}

TEST(Lab10_on_gradient_ready, CopiesEachGradientToItsOffsetAndStartsTheBucketWhenItIsFull) {
  RecordingCommunicator comm;
  auto params = three_params();
  auto grads = three_grads();
  GradientBuckets buckets = lab10::make_gradient_buckets(params, 40, comm);
  ASSERT_EQ(buckets.buckets.size(), 2u) << "the test's layout: bucket 0 = parameters {2, 1}, bucket 1 = {0}";

  lab10::on_gradient_ready(buckets, 2, grads[2]);
  EXPECT_EQ(comm.started.size(), 0u) << "bucket 0 still misses parameter 1's gradient: no all-reduce may start yet";
  EXPECT_EQ(buckets.buckets[0].ready, 1u) << "bucket 0's ready count after its first gradient";
  lab10::on_gradient_ready(buckets, 1, grads[1]);
  ASSERT_EQ(comm.started.size(), 1u) << "bucket 0 is full after parameter 1: its all-reduce must start at once";
  EXPECT_EQ(comm.started[0].flat.data_ptr(), buckets.buckets[0].flat.data_ptr())
      << "the all-reduce must run on the bucket's own flat tensor, in place";
  EXPECT_TRUE(tensors_close(comm.started[0].at_start, torch::cat({grads[2].flatten(), grads[1].flatten()}), 0, 0,
                            "bucket 0 when its all-reduce started (parameter 2 at offset 0, parameter 1 at 5)"));
  EXPECT_EQ(buckets.buckets[0].handle, 0) << "the bucket must keep the handle start_allreduce_sum returned";

  lab10::on_gradient_ready(buckets, 0, grads[0]);
  ASSERT_EQ(comm.started.size(), 2u) << "bucket 1 is full after parameter 0: its all-reduce must start";
  EXPECT_TRUE(tensors_close(comm.started[1].at_start, grads[0].flatten(), 0, 0, "bucket 1 when it started"));
  EXPECT_EQ(buckets.buckets[1].handle, 1) << "bucket 1's handle";
  EXPECT_EQ(comm.waits, 0) << "the hook must not wait: waiting is wait_for_gradients' job, after backward";
}

TEST(Lab10_on_gradient_ready, PlacesGradientsByOffsetWhateverOrderTheyArriveIn) {
  RecordingCommunicator comm;
  auto params = three_params();
  auto grads = three_grads();
  GradientBuckets buckets = lab10::make_gradient_buckets(params, 40, comm);
  lab10::on_gradient_ready(buckets, 1, grads[1]);  // parameter 1 before parameter 2 this time
  EXPECT_EQ(comm.started.size(), 0u) << "bucket 0 still misses parameter 2's gradient";
  lab10::on_gradient_ready(buckets, 2, grads[2]);
  ASSERT_EQ(comm.started.size(), 1u) << "bucket 0 is full: its all-reduce must start";
  EXPECT_TRUE(tensors_close(comm.started[0].at_start, torch::cat({grads[2].flatten(), grads[1].flatten()}), 0, 0,
                            "bucket 0 (each gradient at its offset_of, not in arrival order)"));
}

TEST(Lab10_on_gradient_ready, StartsBucketsDuringBackwardFromTheHooks) {
  RecordingCommunicator comm;
  torch::manual_seed(1);
  torch::nn::Sequential model(torch::nn::Linear(8, 16), torch::nn::Tanh(), torch::nn::Linear(16, 16), torch::nn::Tanh(),
                              torch::nn::Linear(16, 4));
  auto params = model->parameters();
  // Buckets of 300 floats: the last layer's gradients fill the first bucket long before the first layer's arrive.
  GradientBuckets buckets = lab10::make_gradient_buckets(params, 300 * 4, comm);
  ASSERT_GE(buckets.buckets.size(), 2u);
  size_t started_before_last_gradient = 0;
  // Registered before the lab's hooks, so it runs first: what had started when the last gradient came.
  params[0].register_hook([&](const torch::Tensor&) { started_before_last_gradient = comm.started.size(); });
  lab10::attach_gradient_hooks(buckets);

  model->forward(torch::randn({5, 8})).pow(2).mean().backward();
  EXPECT_GE(started_before_last_gradient, 1u)
      << "when the first layer's gradient (the last of backward) arrived, no bucket had started: the all-reduces "
         "must start from the hooks as each bucket fills, so they overlap the rest of backward";
  ASSERT_EQ(comm.started.size(), buckets.buckets.size()) << "every bucket's all-reduce must start once per backward";
  for (size_t b = 0; b < buckets.buckets.size(); ++b) {
    std::vector<torch::Tensor> expected;
    for (size_t p : buckets.buckets[b].params) expected.push_back(params[p].grad().flatten());
    EXPECT_TRUE(
        tensors_close(comm.started[b].at_start, torch::cat(expected), 1e-7, 1e-6,
                      "bucket " + std::to_string(b) + " when its all-reduce started, against autograd's .grad"));
  }
}

// Buckets as on_gradient_ready leaves them after backward, built here without it, so these tests grade
// wait_for_gradients alone.
GradientBuckets after_backward(RecordingCommunicator& comm, std::vector<torch::Tensor>& params,
                               const std::vector<torch::Tensor>& grads, bool start_bucket_1 = true) {
  GradientBuckets buckets = lab10::make_gradient_buckets(params, 40, comm);
  for (size_t b = 0; b < buckets.buckets.size(); ++b) {
    auto& bucket = buckets.buckets[b];
    if (b == 1 && !start_bucket_1) continue;
    for (size_t p : bucket.params) {
      bucket.flat.narrow(0, buckets.offset_of[p], grads[p].numel()).copy_(grads[p].flatten());
    }
    bucket.ready = bucket.params.size();
    bucket.handle = comm.start_allreduce_sum(bucket.flat);
  }
  return buckets;
}

TEST(Lab10_wait_for_gradients, WaitsForEveryBucketAndSetsEachGradToTheAverage) {
  RecordingCommunicator comm(/*size=*/2, /*peer_factor=*/3.0);  // the other worker's gradients are 3x ours
  auto params = three_params();
  const auto grads = three_grads();
  GradientBuckets buckets = after_backward(comm, params, grads);
  lab10::wait_for_gradients(buckets);
  EXPECT_EQ(comm.waits, 2) << "one wait per bucket";
  for (size_t p = 0; p < params.size(); ++p) {
    ASSERT_TRUE(params[p].grad().defined()) << "parameter " << p << " has no .grad after wait_for_gradients";
    EXPECT_TRUE(tensors_close(params[p].grad(), comm.sum_of(grads[p]) / 2, 1e-7, 1e-6,
                              "parameter " + std::to_string(p) + "'s .grad: (ours + the other worker's) / 2 workers"));
  }
}

TEST(Lab10_wait_for_gradients, LeavesTheBucketsReadyForTheNextStep) {
  RecordingCommunicator comm;
  auto params = three_params();
  GradientBuckets buckets = after_backward(comm, params, three_grads());
  lab10::wait_for_gradients(buckets);
  for (size_t b = 0; b < buckets.buckets.size(); ++b) {
    EXPECT_EQ(buckets.buckets[b].ready, 0u) << "bucket " << b << "'s ready count after the wait";
    EXPECT_EQ(buckets.buckets[b].handle, -1) << "bucket " << b << "'s handle after the wait";
  }
}

TEST(Lab10_wait_for_gradients, NamesTheBucketWhoseAllReduceNeverStarted) {
  RecordingCommunicator comm;
  auto params = three_params();
  GradientBuckets buckets = after_backward(comm, params, three_grads(), /*start_bucket_1=*/false);
  try {
    lab10::wait_for_gradients(buckets);
    FAIL() << "bucket 1 never started its all-reduce: wait_for_gradients must throw speedlabs::RuntimeFailure";
  } catch (const speedlabs::RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("bucket 1"), std::string::npos)
        << "the message should name bucket 1, got: " << e.what();
  }
}

TEST(Lab10_wait_for_gradients, TwoMpiWorkersGiveTheLossesOfOneAllReducePerGradient) {
  SPEEDLABS_REQUIRE_DATA();
  lab10::Config config = graded_job_config();
  config.steps = 5;
  config.bucket_mb = 0.05;  // several buckets even for the tiny model
  const auto job = lab10::run_job(config, 2, {"naive", "bucketed"}, false);
  const auto& naive = job.mode("naive");
  const auto& bucketed = job.mode("bucketed");
  ASSERT_GE(job.buckets, 2) << "the test wants several buckets";
  ASSERT_EQ(bucketed.losses.size(), naive.losses.size());
  for (size_t step = 0; step < naive.losses.size(); ++step) {
    // The same sums in another grouping (float32): see kLossRtol in experiment.cpp.
    EXPECT_TRUE(numbers_close(bucketed.losses[step], naive.losses[step], 0, 1e-4,
                              "bucketed loss at step " + std::to_string(step) + " (naive's is expected)"));
    EXPECT_TRUE(bucketed.in_sync[step]) << "the two workers' weights differ after step " << step;
  }
}

// --- the bucketed step's speed ---------------------------------------------------------------------------

// Naive's median step over bucketed's, one ratio per 2-worker job, in @p rounds jobs whose two modes swap
// order from job to job (as scaling_efficiency's rounds alternate), and the machine's reading over them all.
speedlabs::Evidence bucketed_against_naive(const lab10::Config& config, int rounds) {
  const speedlabs::ContentionProbe probe;  // the workers are reaped descendants: their CPU counts as ours
  std::vector<double> fractions;
  for (int round = 0; round < rounds; ++round) {
    const std::vector<std::string> modes =
        round % 2 == 0 ? std::vector<std::string>{"naive", "bucketed"} : std::vector<std::string>{"bucketed", "naive"};
    const auto job = lab10::run_job(config, 2, modes, false);
    // Every timed step's result checked: a bucketed step that skips the all-reduce is fast and wrong.
    const auto& naive_losses = job.mode("naive").losses;
    const auto& bucketed_losses = job.mode("bucketed").losses;
    EXPECT_EQ(bucketed_losses.size(), naive_losses.size()) << "steps of the bucketed and the naive mode";
    for (size_t step = 0; step < std::min(naive_losses.size(), bucketed_losses.size()); ++step) {
      EXPECT_TRUE(numbers_close(bucketed_losses[step], naive_losses[step], 0, 1e-4,
                                "timed job " + std::to_string(round) + ": the bucketed loss at step " +
                                    std::to_string(step) + " (naive's is expected: the speed counts only then)"));
    }
    fractions.push_back(lab10::summary_after_warmup(job.mode("naive").step_ms).median /
                        lab10::summary_after_warmup(job.mode("bucketed").step_ms).median);
  }
  speedlabs::Evidence evidence(speedlabs::summarize_samples(fractions), probe.read(), speedlabs::LoadEffect::ratio);
  return evidence;
}

// The point of the buckets is speed: the whole bucketed step (your on_gradient_ready and wait_for_gradients)
// timed against the naive one (one blocking all-reduce per gradient after backward) with 2 MPI workers, in
// alternating rounds of jobs (tests/support/speed.h scores them). Full points at 0.8 of naive's speed or
// more, none at 0.5 or less.
TEST(Lab10_on_gradient_ready_speed, TheBucketedStepKeepsUpWithTheNaiveOne) {
  SPEEDLABS_REQUIRE_DATA();
  lab10::Config config = graded_job_config();
  config.steps = 10;
  speedlabs::testing::SpeedRule rule{lab10::speed_rules::on_gradient_ready_speed.full,
                                     lab10::speed_rules::on_gradient_ready_speed.zero};
  rule.best = "the naive step";
  speedlabs::testing::grade_speed_of(
      "the bucketed step against the naive one, 2 workers (tiny model, B=4, T=16)",
      [&] { return bucketed_against_naive(config, 5); }, rule);
}

}  // namespace
