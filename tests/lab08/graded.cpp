// Lab 08 graded tests: the checkpointed block (./lab check 08). Suite name = the exercise function.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/autocast_guard.h"
#include "common/gpt.h"
#include "common/host_memory.h"
#include "exercise.h"
#include "labs/05_gpt2/exercise.h"
#include "tests/support/expect.h"

namespace {

using speedlabs::testing::numbers_close;
using speedlabs::testing::tensors_close;

// One block of the tiny GPT (C = 64, 4 heads), with the written-out attention.
speedlabs::gpt::Block make_block() {
  torch::manual_seed(7);
  return speedlabs::gpt::Block(speedlabs::gpt::GPTConfig::tiny(), lab05::causal_attention);
}

lab08::BlockFn as_fn(speedlabs::gpt::Block& block) {
  return [impl = block.ptr()](const torch::Tensor& x) { return impl->forward(x); };
}

torch::Tensor make_input() {
  torch::manual_seed(8);
  return torch::randn({2, 16, 64}).requires_grad_(true);
}

// A fixed, uneven upstream gradient, so every output element matters.
torch::Tensor weight_for(const torch::Tensor& y) { return torch::linspace(-1.0, 1.0, y.numel()).view(y.sizes()); }

struct Grads {
  torch::Tensor output, input;
  std::vector<torch::Tensor> params;
};

Grads run(speedlabs::gpt::Block& block, const lab08::BlockFn& fn, bool checkpoint) {
  const torch::Tensor x = make_input();
  const torch::Tensor y = checkpoint ? lab08::checkpointed_block(fn, x) : fn(x);
  (y * weight_for(y)).sum().backward();
  Grads grads{y.detach(), x.grad(), {}};
  for (auto& p : block->parameters()) {
    grads.params.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
    p.mutable_grad() = torch::Tensor();
  }
  return grads;
}

// Float32 on both sides: the same kernels on the same inputs. The input's gradient and the parameters'
// may be summed in another order through the inner backward: a few ulps, well inside 1e-5.
void expect_same(const Grads& got, const Grads& expected) {
  EXPECT_TRUE(tensors_close(got.output, expected.output, 1e-6, 1e-5, "output"));
  ASSERT_TRUE(got.input.defined()) << "the input got no gradient: backward must return it";
  EXPECT_TRUE(tensors_close(got.input, expected.input, 1e-6, 1e-5, "input gradient"));
  ASSERT_EQ(got.params.size(), expected.params.size());
  for (size_t i = 0; i < got.params.size(); ++i) {
    ASSERT_TRUE(got.params[i].defined()) << "parameter " << i << " got no gradient: backpropagate the recomputed block";
    EXPECT_TRUE(
        tensors_close(got.params[i], expected.params[i], 1e-6, 1e-5, "gradient of parameter " + std::to_string(i)));
  }
}

TEST(Lab08_checkpointed_block, ComputesWhatTheBlockComputes) {
  auto block = make_block();
  const auto x = make_input();
  const auto expected = as_fn(block)(x);
  const auto got = lab08::checkpointed_block(as_fn(block), x);
  EXPECT_TRUE(tensors_close(got, expected, 0, 0, "output"));
  EXPECT_TRUE(got.requires_grad()) << "the output must require grad when the input does";
}

TEST(Lab08_checkpointed_block, GivesThePlainBlocksGradients) {
  auto block = make_block();
  const Grads expected = run(block, as_fn(block), false);
  expect_same(run(block, as_fn(block), true), expected);
}

// The point of checkpointing: after the forward, nothing but the output is new (the saved input was
// there already). The RNG state the function keeps is a few kilobytes; a plain block keeps ~17 (B, T, C).
TEST(Lab08_checkpointed_block, KeepsOnlyItsInputAfterForward) {
  speedlabs::install_host_memory_counter();
  auto block = make_block();
  const auto x = make_input();
  const int64_t rng_state = at::globalContext().defaultGenerator(c10::kCPU).get_state().nbytes();
  const int64_t before = speedlabs::host_memory_stats().live_bytes;
  const auto y = lab08::checkpointed_block(as_fn(block), x);
  const int64_t kept = speedlabs::host_memory_stats().live_bytes - before;
  const int64_t output = y.nbytes();
  EXPECT_LE(kept, output + rng_state + 1024)
      << "after forward " << kept << " bytes are new; the output is " << output << " and the RNG state " << rng_state
      << ": the block's activations were kept (run it with gradients off, save only x)";
  const auto plain = as_fn(block)(x);
  const int64_t plain_kept = speedlabs::host_memory_stats().live_bytes - before - kept;
  EXPECT_GT(plain_kept, 10 * output) << "a plain block keeps its activations: " << plain_kept << " bytes";
}

// A block that draws random numbers (dropout) must draw the same mask when it is recomputed.
TEST(Lab08_checkpointed_block, ReplaysTheForwardsRandomNumbers) {
  torch::manual_seed(9);
  torch::nn::Linear linear(64, 64);
  const lab08::BlockFn dropout_block = [&](const torch::Tensor& x) {
    return torch::dropout(linear->forward(x), 0.5, /*train=*/true);
  };
  const auto gradients = [&](bool checkpoint) {
    torch::manual_seed(10);
    const auto x = make_input();
    const auto y = checkpoint ? lab08::checkpointed_block(dropout_block, x) : dropout_block(x);
    (y * weight_for(y)).sum().backward();
    const auto grad = linear->weight.grad().clone();
    linear->weight.mutable_grad() = torch::Tensor();
    linear->bias.mutable_grad() = torch::Tensor();
    return std::make_pair(grad, x.grad());
  };
  const auto [plain_weight, plain_input] = gradients(false);
  const auto [weight, input] = gradients(true);
  EXPECT_TRUE(tensors_close(weight, plain_weight, 1e-6, 1e-5, "weight gradient under dropout"));
  ASSERT_TRUE(input.defined());
  EXPECT_TRUE(tensors_close(input, plain_input, 1e-6, 1e-5, "input gradient under dropout"));
}

// The replay must not move the program's random numbers: after backward they continue where the
// forward left them, as if nothing had been recomputed.
TEST(Lab08_checkpointed_block, LeavesTheRandomGeneratorAsItWas) {
  const lab08::BlockFn noisy = [](const torch::Tensor& x) { return x * torch::rand_like(x); };
  const auto next_after = [&](bool checkpoint) {
    torch::manual_seed(11);
    const auto x = make_input();
    const auto y = checkpoint ? lab08::checkpointed_block(noisy, x) : noisy(x);
    y.sum().backward();
    return torch::rand({1}).item<double>();
  };
  EXPECT_TRUE(numbers_close(next_after(true), next_after(false), 0, 0, "the first random number after backward"));
}

// Forward under bf16 autocast, backward outside it (as a training loop does): the recomputation must
// run under the forward's autocast, or its bf16 matmuls become float32 ones and the gradients change
// by ~1e-2 relative. Both sides compute the same bf16 ops, so they agree to float32 rounding.
TEST(Lab08_checkpointed_block, RecomputesUnderTheForwardsAutocast) {
  if (!speedlabs::autocast_supported(c10::Device(c10::kCPU), c10::kBFloat16)) GTEST_SKIP() << "no CPU bf16 autocast";
  auto block = make_block();
  const auto grads = [&](bool checkpoint) {
    const torch::Tensor x = make_input();
    torch::Tensor y;
    {
      speedlabs::AutocastGuard autocast(c10::kCPU, c10::kBFloat16);
      y = checkpoint ? lab08::checkpointed_block(as_fn(block), x) : as_fn(block)(x);
    }
    (y.to(torch::kFloat32) * weight_for(y)).sum().backward();
    Grads g{y.detach(), x.grad(), {}};
    for (auto& p : block->parameters()) {
      g.params.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
      p.mutable_grad() = torch::Tensor();
    }
    return g;
  };
  const Grads expected = grads(false);
  expect_same(grads(true), expected);
}

}  // namespace
