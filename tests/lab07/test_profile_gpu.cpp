// Lab 07 on a CUDA GPU: CUDA kernels in the trace, the per-op cost on the device, pinned batches and
// non_blocking copies in the loader comparison. Every test skips where there is no CUDA GPU.
#include <gtest/gtest.h>

#include "common/device.h"
#include "common/files.h"
#include "common/gpt.h"
#include "datasets/data_files.h"
#include "feeding.h"
#include "op_cost.h"
#include "trace.h"

namespace {

namespace gpt = speedlabs::gpt;

#define SKIP_WITHOUT_CUDA() \
  if (!speedlabs::cuda_available()) GTEST_SKIP() << "no CUDA GPU here"

const c10::Device kCuda(c10::kCUDA, 0);

TEST(Lab07Gpu, TheTraceHoldsTheStepsCudaKernels) {
  SKIP_WITHOUT_CUDA();
  torch::manual_seed(0);
  const auto config = gpt::GPTConfig::tiny();
  gpt::GPT model(config);
  model->to(kCuda);
  auto optimizer = gpt::make_adamw(model, 1e-3);
  const auto x = torch::randint(config.vocab_size, {4, 64}, torch::TensorOptions(torch::kLong).device(kCuda));
  const auto step = [&] { return lab07::ranged_train_step(model, optimizer, x, x); };
  step();
  const auto profile = lab07::profile_step(step, kCuda, "");
  EXPECT_GT(profile.cuda_kernels, profile.op_calls / 2) << "most ops launch a kernel";
  ASSERT_FALSE(profile.kernels.empty());
  EXPECT_GT(profile.kernels.front().self_ms, 0);
  for (const auto& range : lab07::step_ranges()) EXPECT_EQ(profile.range_count.at(range), 1) << range;
}

TEST(Lab07Gpu, TinyOpsCostMicrosecondsOnTheDevice) {
  SKIP_WITHOUT_CUDA();
  const auto cost = lab07::measure_op_cost_cpp(kCuda, {500, 3, 1});
  EXPECT_GT(cost.add_us, 0);
  EXPECT_LT(cost.add_us, 1000) << "a launch is microseconds";
}

TEST(Lab07Gpu, LoaderBatchesArePinnedAndBothLoopsSeeTheSameOnes) {
  SKIP_WITHOUT_CUDA();
  const auto dir = datasets::resolve_data_dir();
  try {
    datasets::require_file(dir, datasets::kShakespearePath);
  } catch (const std::exception& e) {
    GTEST_SKIP() << e.what();
  }
  const auto tokenizer = datasets::GPT2Tokenizer::load(dir);
  const lab07::DocumentBatches batches(
      tokenizer, speedlabs::read_file(datasets::require_file(dir, datasets::kShakespearePath).string()), 4, 64, 8192,
      /*pin=*/true);
  EXPECT_TRUE(batches.make(0).x.is_pinned());
  const auto feed = lab07::compare_loaders(batches, gpt::GPTConfig::tiny(), 1e-3, 2, 6, 2, kCuda);
  EXPECT_TRUE(feed.all_pinned);
  EXPECT_TRUE(feed.same_batches);
}

}  // namespace
