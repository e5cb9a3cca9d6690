// Lab 12 graded tests: what ./lab check 12 runs against the exercise (chunk_forward, chunk_backward). The
// references are libtorch's own torch::linear + cross_entropy and autograd through them, in the same dtype.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>

#include "chunked_head.h"
#include "exercise.h"
#include "tests/support/expect.h"

namespace {

using speedlabs::testing::tensors_close;

struct Inputs {
  torch::Tensor hidden, weight, targets;
};

// A chunk of `rows` hidden states of width C against a vocabulary of V, logits of about `scale` units.
Inputs inputs(int64_t rows, int64_t C, int64_t V, double scale, torch::ScalarType dtype, uint64_t seed) {
  torch::manual_seed(seed);
  return {torch::randn({rows, C}).to(dtype), (torch::randn({V, C}) * (scale / std::sqrt(C))).to(dtype),
          torch::randint(V, {rows}, torch::kLong)};
}

torch::Tensor reference_loss_sum(const Inputs& in) {
  return torch::nn::functional::cross_entropy(torch::linear(in.hidden, in.weight), in.targets,
                                              torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
}

// float32: the logits are dot products of C products, the log-sum-exp a sum of V exps, the loss a sum of rows;
// libtorch's kernels and the chunk's sum them in other orders. float32 rounds at 6e-8 relative and such sums
// err by about sqrt(n) roundings: 1e-6 relative at V = 5,000. 1e-5 leaves room; a missing max, a wrong target
// or a mean instead of a sum errs by far more.
constexpr double kFloatRtol = 1e-5;
// bfloat16 keeps 8 significant bits (3.9e-3 relative): the logits are rounded there, as libtorch's linear rounds
// them, and libtorch's bfloat16 loss is itself rounded to bfloat16. 1e-2 is under three roundings.
constexpr double kBf16Rtol = 1e-2;

TEST(Lab12_chunk_forward, MatchesLinearPlusCrossEntropyInFloat32) {
  const auto in = inputs(37, 48, 5000, 3.0, torch::kFloat, 1);
  const auto out = lab12::chunk_forward(in.hidden, in.weight, in.targets);
  ASSERT_TRUE(out.loss_sum.defined() && out.lse.defined()) << "loss_sum or lse was not returned";
  EXPECT_TRUE(tensors_close(out.loss_sum, reference_loss_sum(in), 0, kFloatRtol, "the chunk's summed loss"));
  EXPECT_TRUE(tensors_close(out.lse, torch::logsumexp(torch::linear(in.hidden, in.weight).to(torch::kDouble), 1), 0,
                            kFloatRtol, "lse, (rows,)"));
}

TEST(Lab12_chunk_forward, SafeForLogitsWhoseExpOverflows) {
  // Logits of about 300: exp(300) is far beyond float32's 3.4e38; a log-sum-exp without the maximum is inf.
  const auto in = inputs(8, 16, 300, 300.0, torch::kFloat, 2);
  const auto out = lab12::chunk_forward(in.hidden, in.weight, in.targets);
  ASSERT_TRUE(torch::isfinite(out.lse).all().item<bool>()) << "lse is not finite for logits of about 300";
  EXPECT_TRUE(tensors_close(out.loss_sum, reference_loss_sum(in), 0, kFloatRtol, "the summed loss, logits ~300"));
}

TEST(Lab12_chunk_forward, MatchesInBfloat16AndReturnsFloat32) {
  const auto in = inputs(29, 64, 3000, 3.0, torch::kBFloat16, 3);
  const auto out = lab12::chunk_forward(in.hidden, in.weight, in.targets);
  ASSERT_TRUE(out.loss_sum.defined() && out.lse.defined()) << "loss_sum or lse was not returned";
  EXPECT_EQ(out.lse.scalar_type(), torch::kFloat) << "lse must be float32 for bfloat16 inputs";
  EXPECT_EQ(out.loss_sum.scalar_type(), torch::kFloat) << "loss_sum must be float32 for bfloat16 inputs";
  EXPECT_TRUE(tensors_close(out.loss_sum, reference_loss_sum(in), 0, kBf16Rtol, "the summed loss in bfloat16"));
}

// Autograd's gradients of sum(cross_entropy) * scale through libtorch's linear, and the chunk's.
struct Grads {
  torch::Tensor hidden, weight;
};

Grads reference_grads(const Inputs& in, double scale) {
  const auto hidden = in.hidden.detach().requires_grad_();
  const auto weight = in.weight.detach().requires_grad_();
  const auto loss =
      torch::nn::functional::cross_entropy(torch::linear(hidden, weight), in.targets,
                                           torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum)) *
      scale;
  const auto grads = torch::autograd::grad({loss}, {hidden, weight});
  return {grads[0], grads[1]};
}

// The chunk's gradients, its weight gradient added to a nonzero accumulator (which must be kept).
Grads chunk_grads(const Inputs& in, double scale, const torch::Tensor& start) {
  const auto lse = lab12::chunk_forward(in.hidden, in.weight, in.targets).lse;
  auto grad_weight = start.clone();
  const auto grad_hidden = lab12::chunk_backward(in.hidden, in.weight, in.targets, lse,
                                                 torch::tensor(static_cast<float>(scale)), grad_weight);
  return {grad_hidden, grad_weight - start};
}

// A gradient element is a sum over V (d hidden) or over the rows (d weight) of products of size up to
// max |gradient|: float32 sums of those err by a few roundings of the largest term; 1e-5 of the largest element
// plus 1e-4 relative covers other orders. A missing scale, a missing "- 1" at the target or a transposed product
// errs by the gradient's own size.
TEST(Lab12_chunk_backward, MatchesAutogradInFloat32WithScaleAndAccumulation) {
  const auto in = inputs(37, 48, 5000, 3.0, torch::kFloat, 4);
  const double scale = 1.0 / 100;  // this chunk's 37 rows of a batch of 100
  const auto expected = reference_grads(in, scale);
  const auto start = torch::randn({5000, 48}) * 1e-3;
  const auto got = chunk_grads(in, scale, start);
  ASSERT_TRUE(got.hidden.defined()) << "no gradient of the hidden states returned";
  EXPECT_EQ(got.hidden.scalar_type(), torch::kFloat);
  const double h_atol = 1e-5 * expected.hidden.abs().max().item<double>();
  const double w_atol = 1e-5 * expected.weight.abs().max().item<double>();
  EXPECT_TRUE(tensors_close(got.hidden, expected.hidden, h_atol, 1e-4, "d hidden (rows, C)"));
  EXPECT_TRUE(
      tensors_close(got.weight, expected.weight, w_atol, 1e-4, "what chunk_backward added to grad_weight (V, C)"));
}

// bfloat16: the logits' gradient is rounded to 8 bits before the two matmuls (libtorch's backward rounds its
// own, in another order), and each matmul rounds its result: a few roundings of 3.9e-3 of the largest
// element. 3e-2 of the largest element catches any wrong term, which errs by the gradient's size.
TEST(Lab12_chunk_backward, MatchesAutogradInBfloat16) {
  const auto in = inputs(29, 64, 3000, 3.0, torch::kBFloat16, 5);
  const double scale = 1.0 / 29;
  const auto expected = reference_grads(in, scale);
  const auto got = chunk_grads(in, scale, torch::zeros({3000, 64}));
  ASSERT_TRUE(got.hidden.defined()) << "no gradient of the hidden states returned";
  EXPECT_EQ(got.hidden.scalar_type(), torch::kBFloat16) << "d hidden must come back in the input's dtype";
  EXPECT_TRUE(tensors_close(got.hidden, expected.hidden, 3e-2 * expected.hidden.abs().max().item<double>(), 0,
                            "d hidden in bfloat16"));
  EXPECT_TRUE(tensors_close(got.weight, expected.weight, 3e-2 * expected.weight.abs().max().item<double>(), 0,
                            "d weight in bfloat16"));
}

// The whole chunked head (lab12::chunked_cross_entropy, which calls the two exercises chunk after chunk) against
// the plain one, with chunks that do not divide the rows.
TEST(Lab12_chunk_backward, ChunkedHeadMatchesThePlainOneEndToEnd) {
  const auto in = inputs(50, 32, 2000, 3.0, torch::kFloat, 6);
  const auto h1 = in.hidden.detach().requires_grad_(), w1 = in.weight.detach().requires_grad_();
  const auto h2 = in.hidden.detach().requires_grad_(), w2 = in.weight.detach().requires_grad_();
  const auto plain = lab12::plain_cross_entropy(h1, w1, in.targets);
  const auto chunked = lab12::chunked_cross_entropy(h2, w2, in.targets, 16);
  EXPECT_TRUE(tensors_close(chunked, plain, 0, kFloatRtol, "the mean loss, 50 rows in chunks of 16"));
  const auto expected = torch::autograd::grad({plain}, {h1, w1});
  const auto got = torch::autograd::grad({chunked}, {h2, w2});
  EXPECT_TRUE(tensors_close(got[0], expected[0], 1e-5 * expected[0].abs().max().item<double>(), 1e-4, "d hidden"));
  EXPECT_TRUE(tensors_close(got[1], expected[1], 1e-5 * expected[1].abs().max().item<double>(), 1e-4, "d weight"));
}

}  // namespace
