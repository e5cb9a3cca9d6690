// Lab 05 graded tests: the student's causal_attention against libtorch's fused kernel, and the student's
// train_step in every precision mode. ./lab check 05 runs them. The graded tests run where the Python
// references are hidden (docs/grading.md), so the parity with Python PyTorch is an ordinary test
// (test_parity.cpp), and ./lab grade compares train_step with the reference outside the student's process.
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/gpt.h"
#include "common/precision.h"
#include "labs/05_gpt2/exercise.h"
#include "tests/support/expect.h"

namespace {

namespace gpt = speedlabs::gpt;
using speedlabs::Precision;
using speedlabs::testing::numbers_close;
using speedlabs::testing::tensors_close;

// --- causal_attention ------------------------------------------------------------------------------------

TEST(Lab05_causal_attention, MatchesTheFusedKernel) {
  torch::manual_seed(1);
  const auto q = torch::randn({2, 3, 17, 8}), k = torch::randn({2, 3, 17, 8}), v = torch::randn({2, 3, 17, 8});
  // float32, sums of 8 and 17 terms in different orders: differences of a few 1e-7; 1e-5 leaves margin.
  EXPECT_TRUE(tensors_close(lab05::causal_attention(q, k, v), gpt::fused_causal_attention(q, k, v), 1e-5, 1e-5,
                            "causal_attention vs at::scaled_dot_product_attention(is_causal), T=17"));
}

TEST(Lab05_causal_attention, MatchesTheFusedKernelOnLongerSequences) {
  torch::manual_seed(3);
  const auto q = torch::randn({2, 3, 33, 16}), k = torch::randn({2, 3, 33, 16}), v = torch::randn({2, 3, 33, 16});
  // A solution may scale q, k^T or the scores, by a division or a multiplication by 1/sqrt(16): float32
  // scores then differ by a rounding or two (6e-8 relative each), which exp and the sums of up to 33
  // weighted values carry into the output as a few 1e-7; the fused kernel sums in yet another order
  // (tiles, online softmax). 1e-5 leaves margin; a missing scale, a wrong mask or a softmax over the wrong
  // axis is off by 1e-1 or more.
  EXPECT_TRUE(tensors_close(lab05::causal_attention(q, k, v), gpt::fused_causal_attention(q, k, v), 1e-5, 1e-5,
                            "causal_attention vs the fused kernel, T=33, head size 16"));
}

TEST(Lab05_causal_attention, IsCausal) {
  torch::manual_seed(2);
  const auto q = torch::randn({1, 2, 10, 4}), k = torch::randn({1, 2, 10, 4}), v = torch::randn({1, 2, 10, 4});
  auto k2 = k.clone(), v2 = v.clone();
  k2.narrow(2, 6, 4).normal_();  // change only positions 6..9
  v2.narrow(2, 6, 4).normal_();
  const auto a = lab05::causal_attention(q, k, v), b = lab05::causal_attention(q, k2, v2);
  EXPECT_TRUE(tensors_close(b.narrow(2, 0, 6), a.narrow(2, 0, 6), 0, 0,
                            "positions 0..5 after changing the keys and values of positions 6..9 (the past must "
                            "not see the future)"));
  EXPECT_FALSE(torch::equal(a.narrow(2, 6, 4), b.narrow(2, 6, 4))) << "positions 6..9 must see their own change";
  // Position 0 attends only to itself: its output is its own value.
  EXPECT_TRUE(tensors_close(a.select(2, 0), v.select(2, 0), 1e-8, 1e-5, "position 0's output (its own value)"));
}

// --- train_step ------------------------------------------------------------------------------------------

// What the forward and backward passes saw, recorded from inside the model's attention.
struct Seen {
  bool forward_autocast = false;
  c10::ScalarType forward_dtype = c10::kFloat;
  std::string forward_matmul_precision;
  bool backward_autocast = false;
  bool backward_ran = false;
};

gpt::GPT spying_model(Seen& seen) {
  torch::manual_seed(3);
  return gpt::GPT(
      gpt::GPTConfig::tiny(), [&seen](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
        seen.forward_autocast = at::autocast::is_autocast_enabled(c10::kCPU);
        seen.forward_matmul_precision = speedlabs::current_matmul_precision();
        seen.forward_dtype = q.scalar_type();  // q comes out of a linear layer: autocast's dtype, or float32
        if (q.requires_grad()) {
          // On the CPU, backward runs on the calling thread, so this sees the caller's autocast state.
          q.register_hook([&seen](const at::TensorBase& /*grad*/) {
            seen.backward_ran = true;
            seen.backward_autocast = at::autocast::is_autocast_enabled(c10::kCPU);
          });
        }
        return gpt::fused_causal_attention(q, k, v);
      });
}

TEST(Lab05_train_step, EachModeSwitchesOnWhatItShould) {
  const auto config = gpt::GPTConfig::tiny();
  torch::manual_seed(5);
  const auto x = torch::randint(config.vocab_size, {2, 8}, torch::kLong);
  const auto y = torch::randint(config.vocab_size, {2, 8}, torch::kLong);  // random targets: loss ~ ln(vocab)
  const std::string before = speedlabs::current_matmul_precision();
  struct Expected {
    Precision mode;
    bool autocast;
    c10::ScalarType dtype;
    std::string matmul_precision;
    bool scaler_used;
  };
  for (const Expected& want : {Expected{Precision::fp32, false, c10::kFloat, "highest", false},
                               Expected{Precision::tf32, false, c10::kFloat, "high", false},
                               Expected{Precision::bf16, true, c10::kBFloat16, "highest", false},
                               Expected{Precision::fp16, true, c10::kHalf, "highest", true}}) {
    SCOPED_TRACE("mode " + speedlabs::to_string(want.mode));
    Seen seen;
    auto model = spying_model(seen);
    const auto initial = model->wte->weight.detach().clone();
    auto optimizer = gpt::make_adamw(model, 1e-3);
    lab03::GradScaler scaler;
    const auto loss = lab05::train_step(model, optimizer, x, y, want.mode, &scaler);
    EXPECT_EQ(seen.forward_autocast, want.autocast) << "autocast during the forward pass";
    EXPECT_EQ(seen.forward_dtype, want.dtype) << "dtype of a linear layer's output in the forward pass";
    EXPECT_EQ(seen.forward_matmul_precision, want.matmul_precision) << "float32 matmul precision during the step";
    EXPECT_TRUE(seen.backward_ran) << "backward did not run";
    EXPECT_FALSE(seen.backward_autocast) << "backward must run outside autocast";
    EXPECT_EQ(speedlabs::current_matmul_precision(), before) << "the matmul precision must be restored";
    EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::kCPU)) << "autocast must be off after the step";
    ASSERT_TRUE(loss.defined()) << "train_step returned an undefined tensor";
    EXPECT_EQ(loss.dim(), 0) << "the loss is a 0-dim tensor";
    EXPECT_EQ(loss.scalar_type(), torch::kFloat) << "the loss is returned as float32";
    EXPECT_FALSE(loss.requires_grad()) << "the loss is returned detached";
    EXPECT_TRUE(std::isfinite(loss.item<double>())) << "loss " << loss.item<double>();
    // The chapter's initial loss: ln(50257) = 10.82 for a model that guesses uniformly.
    EXPECT_TRUE(numbers_close(loss.item<double>(), std::log(50257.0), 0.3, 0, "the step's loss (~ln vocab)"));
    for (const auto& p : model->parameters()) EXPECT_EQ(p.scalar_type(), torch::kFloat) << "weights stay float32";
    EXPECT_FALSE(torch::equal(model->wte->weight.detach(), initial)) << "the optimizer did not step";
    for (const auto& p : model->parameters()) {
      EXPECT_TRUE(!p.grad().defined() || p.grad().abs().max().item<double>() == 0.0)
          << "the gradients must be zeroed after the step";
    }
    EXPECT_EQ(scaler.get_growth_tracker(), want.scaler_used ? 1 : 0)
        << (want.scaler_used ? "fp16 must step through the scaler and update it" : "only fp16 uses the scaler");
  }
}

// One SGD step in @p mode from the same weights and batch; returns the change of every weight.
torch::Tensor sgd_update(Precision mode, const torch::Tensor& x, const torch::Tensor& y) {
  torch::manual_seed(6);
  gpt::GPT model(gpt::GPTConfig::tiny());
  std::vector<torch::Tensor> before;
  for (const auto& p : model->parameters()) before.push_back(p.detach().clone().flatten());
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.5));
  lab03::GradScaler scaler;
  lab05::train_step(model, optimizer, x, y, mode, &scaler);
  std::vector<torch::Tensor> deltas;
  const auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) deltas.push_back(params[i].detach().flatten() - before[i]);
  return torch::cat(deltas);
}

TEST(Lab05_train_step, LowPrecisionUpdatesMatchFp32) {
  // With SGD the update is lr * gradient, so a gradient left scaled by 65536 (fp16), lost to underflow or
  // computed on the wrong loss shows up directly. The 16-bit modes round the forward pass (bfloat16 keeps
  // 8 significant bits, float16 11; relative rounding 2^-9 and 2^-12), so the update vector differs from
  // fp32's by a few roundings carried through two layers: well under 10%. A wrong step is off by 100% or more.
  const auto config = gpt::GPTConfig::tiny();
  torch::manual_seed(7);
  const auto x = torch::randint(config.vocab_size, {2, 16}, torch::kLong);
  const auto y = torch::randint(config.vocab_size, {2, 16}, torch::kLong);
  const auto reference = sgd_update(Precision::fp32, x, y);
  for (Precision mode : {Precision::tf32, Precision::bf16, Precision::fp16}) {
    const auto update = sgd_update(mode, x, y);
    const double relative = ((update - reference).norm() / reference.norm()).item<double>();
    EXPECT_TRUE(
        numbers_close(relative, 0.0, 0.10, 0,
                      "|update - fp32 update| / |fp32 update| of one SGD step in " + speedlabs::to_string(mode)));
  }
}

}  // namespace
