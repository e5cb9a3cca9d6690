// Lab 03 graded tests: the student's loss scaler against libtorch's fused kernels and against the numbers
// Python's torch.amp.GradScaler gives (reference/grad_scaler_reference.py). ./lab check 03 runs them.
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "exercise.h"
#include "tests/support/expect.h"

namespace {

using lab03::GradScaler;
using lab03::GradScalerOptions;
using speedlabs::testing::numbers_close;
using speedlabs::testing::tensors_close;

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// One row of reference/grad_scaler_reference.py's output (torch 2.13.0, CPU, run with
// /work/main/.venv/bin/python reference/grad_scaler_reference.py). w = [1, -2], SGD lr 0.125,
// loss = sum(w * x), GradScaler(init_scale 1024, growth 2, backoff 0.5, growth_interval 3).
// All values are sums of powers of two, exact in float32, so the comparisons are exact.
struct PythonRow {
  std::vector<float> x;
  std::vector<float> scaled_grad;  // NaN where Python printed NaN
  std::vector<float> unscaled_grad;
  bool stepped;
  std::vector<float> w;
  double scale;
  int64_t growth_tracker;
};

const std::vector<PythonRow> kPython = {
    {{0.5f, 0.25f}, {512, 256}, {0.5f, 0.25f}, true, {0.9375f, -2.03125f}, 1024, 1},
    {{kInf, 1}, {kInf, 1024}, {kInf, 1}, false, {0.9375f, -2.03125f}, 512, 0},
    {{kNaN, 1}, {kNaN, 512}, {kNaN, 1}, false, {0.9375f, -2.03125f}, 256, 0},
    {{0.5f, 0.25f}, {128, 64}, {0.5f, 0.25f}, true, {0.875f, -2.0625f}, 256, 1},
    {{1, 1}, {256, 256}, {1, 1}, true, {0.75f, -2.1875f}, 256, 2},
    {{0.25f, 0.5f}, {64, 128}, {0.25f, 0.5f}, true, {0.71875f, -2.25f}, 512, 0},
    {{2, 0.5f}, {1024, 256}, {2, 0.5f}, true, {0.46875f, -2.3125f}, 512, 1},
};

// Exact comparison (NaN matches NaN): every number here is exact in float32.
::testing::AssertionResult same(const torch::Tensor& actual, const std::vector<float>& expected,
                                const std::string& what) {
  return tensors_close(actual, torch::tensor(expected), 0.0, 0.0, what);
}

GradScalerOptions reference_options() {
  GradScalerOptions options;
  options.init_scale = 1024;
  options.growth_interval = 3;
  return options;
}

// --- unscale_and_check -----------------------------------------------------------------------------------

TEST(Lab03_unscale_and_check, MatchesTheFusedKernel) {
  torch::manual_seed(3);
  for (const bool poison : {false, true}) {
    std::vector<torch::Tensor> mine{torch::randn({5, 7}) * 1024, torch::randn({13}) * 1024};
    if (poison) mine[1][4] = kNaN;
    std::vector<torch::Tensor> fused{mine[0].clone(), mine[1].clone()};
    const double inv_scale = 1.0 / 1024;
    const auto found = lab03::unscale_and_check(mine, inv_scale);
    auto fused_found = torch::zeros({});
    at::_amp_foreach_non_finite_check_and_unscale_(fused, fused_found, torch::full({}, inv_scale));
    ASSERT_TRUE(found.defined()) << "unscale_and_check returned an undefined tensor";
    EXPECT_EQ(found.dim(), 0) << "the flag must be a 0-dim tensor";
    EXPECT_EQ(found.scalar_type(), torch::kFloat32) << "the flag must be float32";
    EXPECT_TRUE(numbers_close(found.item<float>(), fused_found.item<float>(), 0, 0,
                              std::string("found_inf with ") + (poison ? "a NaN" : "no inf/NaN")));
    // Multiplying by a power of two is exact, so the two must agree bit for bit (NaN where NaN).
    for (size_t i = 0; i < mine.size(); ++i) {
      EXPECT_TRUE(tensors_close(mine[i], fused[i], 0, 0, "unscaled gradient " + std::to_string(i)));
    }
  }
}

TEST(Lab03_unscale_and_check, SeesInfAndNaNAndEmptyLists) {
  // Python's GradScaler facts (reference/grad_scaler_reference.py, step 2): scaled grads [inf, 1024]
  // at scale 1024 unscale to [inf, 1] with found_inf = 1.
  std::vector<torch::Tensor> grads{torch::tensor({kInf, 1024.0f})};
  EXPECT_TRUE(
      numbers_close(lab03::unscale_and_check(grads, 1.0 / 1024).item<float>(), 1.0, 0, 0, "found_inf of [inf, 1024]"));
  EXPECT_TRUE(same(grads[0], {kInf, 1.0f}, "[inf, 1024] unscaled by 1/1024"));
  std::vector<torch::Tensor> clean{torch::tensor({512.0f, 256.0f})};
  EXPECT_TRUE(
      numbers_close(lab03::unscale_and_check(clean, 1.0 / 1024).item<float>(), 0.0, 0, 0, "found_inf of [512, 256]"));
  EXPECT_TRUE(same(clean[0], {0.5f, 0.25f}, "[512, 256] unscaled by 1/1024"));
  EXPECT_TRUE(numbers_close(lab03::unscale_and_check({}, 0.5).item<float>(), 0.0, 0, 0, "found_inf of an empty list"));
}

// --- next_scale_state ------------------------------------------------------------------------------------

TEST(Lab03_next_scale_state, FollowsPythonsSequence) {
  // Python's torch.amp.GradScaler("cpu", init_scale=1024, growth_interval=3) for the steps clean, inf, nan,
  // clean, clean, clean, clean gave (scale, tracker): (1024,1) (512,0) (256,0) (256,1) (256,2) (512,0) (512,1).
  const std::vector<bool> found{false, true, true, false, false, false, false};
  const std::vector<std::pair<double, int64_t>> python{{1024, 1}, {512, 0}, {256, 0}, {256, 1},
                                                       {256, 2},  {512, 0}, {512, 1}};
  lab03::ScaleState state{1024, 0};
  const lab03::ScaleRule rule{2.0, 0.5, 3};
  for (size_t i = 0; i < found.size(); ++i) {
    state = lab03::next_scale_state(state, found[i], rule);
    EXPECT_EQ(state.scale, python[i].first) << "scale after step " << i << (found[i] ? " (inf/NaN)" : " (clean)");
    EXPECT_EQ(state.growth_tracker, python[i].second) << "growth_tracker after step " << i;
  }
}

TEST(Lab03_next_scale_state, MatchesAmpUpdateScaleOnRandomSequences) {
  std::mt19937 random(7);
  const lab03::ScaleRule rule{2.0, 0.5, 4};
  auto scale = torch::full({}, 65536.0f);
  auto tracker = torch::zeros({}, torch::kInt32);
  lab03::ScaleState state{65536.0, 0};
  for (int i = 0; i < 200; ++i) {
    const bool inf = random() % 5 == 0;
    at::_amp_update_scale_(scale, tracker, torch::full({}, inf ? 1.0f : 0.0f), rule.growth_factor, rule.backoff_factor,
                           rule.growth_interval);
    state = lab03::next_scale_state(state, inf, rule);
    ASSERT_EQ(state.scale, scale.item<double>())
        << "scale at iteration " << i << " (libtorch's _amp_update_scale_ on the right)";
    ASSERT_EQ(state.growth_tracker, tracker.item<int64_t>()) << "growth_tracker at iteration " << i;
  }
}

TEST(Lab03_next_scale_state, DoesNotGrowPastFloat32) {
  const auto state = lab03::next_scale_state({std::ldexp(1.0, 127), 1}, false, {2.0, 0.5, 2});
  EXPECT_EQ(state.scale, std::ldexp(1.0, 127)) << "2^128 is inf in float32: the scale must stay 2^127";
  EXPECT_EQ(state.growth_tracker, 0);
}

// --- GradScaler: scale, unscale_, step, update -----------------------------------------------------------

TEST(Lab03_GradScaler, FollowsPythonsSequenceExactly) {
  auto w = torch::tensor({1.0f, -2.0f}).requires_grad_();
  torch::optim::SGD optimizer({w}, torch::optim::SGDOptions(0.125));
  GradScaler scaler(reference_options());
  for (size_t step = 0; step < kPython.size(); ++step) {
    SCOPED_TRACE("step " + std::to_string(step) + " of reference/grad_scaler_reference.py");
    const auto& row = kPython[step];
    optimizer.zero_grad();
    const auto loss = (w * torch::tensor(row.x)).sum();
    scaler.scale(loss).backward();
    EXPECT_TRUE(same(w.grad(), row.scaled_grad, "gradient of the scaled loss"));
    scaler.unscale_(optimizer);
    EXPECT_TRUE(same(w.grad(), row.unscaled_grad, "gradient after unscale_()"));
    EXPECT_EQ(scaler.step(optimizer), row.stepped) << "step() returns whether the optimizer stepped";
    scaler.update();
    EXPECT_TRUE(same(w.detach(), row.w, "weights after the step"));
    EXPECT_EQ(scaler.get_scale(), row.scale) << "scale after update()";
    EXPECT_EQ(scaler.get_growth_tracker(), row.growth_tracker) << "growth_tracker after update()";
  }
  // Python's final state_dict: scale 512, growth_factor 2, backoff_factor 0.5, growth_interval 3, tracker 1.
  const nlohmann::json state = scaler.state_dict();
  EXPECT_EQ(state, nlohmann::json({{"scale", 512.0},
                                   {"growth_factor", 2.0},
                                   {"backoff_factor", 0.5},
                                   {"growth_interval", 3},
                                   {"_growth_tracker", 1}}));
}

TEST(Lab03_GradScaler, StepWithoutUnscaleUnscalesItself) {
  auto w = torch::tensor({1.0f, -2.0f}).requires_grad_();
  torch::optim::SGD optimizer({w}, torch::optim::SGDOptions(0.125));
  GradScaler scaler(reference_options());
  scaler.scale((w * torch::tensor({0.5f, 0.25f})).sum()).backward();
  EXPECT_TRUE(scaler.step(optimizer));
  scaler.update();
  EXPECT_TRUE(same(w.detach(), kPython[0].w, "weights after step() without unscale_()"));
}

TEST(Lab03_GradScaler, MisuseIsRejected) {
  auto w = torch::tensor({1.0f}).requires_grad_();
  torch::optim::SGD optimizer({w}, torch::optim::SGDOptions(0.1));
  GradScaler scaler;
  const auto scaled = scaler.scale(w.sum());  // first, so that an unwritten scale() fails this test
  EXPECT_THROW(scaler.update(), std::logic_error) << "update() with nothing recorded";
  scaled.backward();
  scaler.unscale_(optimizer);
  EXPECT_THROW(scaler.unscale_(optimizer), std::logic_error) << "a second unscale_() before update()";
  scaler.step(optimizer);
  EXPECT_THROW(scaler.step(optimizer), std::logic_error) << "a second step() before update()";
  scaler.update();
  EXPECT_THROW(GradScaler(GradScalerOptions{65536, 1.0, 0.5, 2000, true}), std::invalid_argument);
}

TEST(Lab03_GradScaler, RefusesHalfGradients) {
  auto w = torch::ones({2}, torch::kHalf).requires_grad_();
  torch::optim::SGD optimizer({w}, torch::optim::SGDOptions(0.1));
  GradScaler scaler;
  scaler.scale(w.sum()).backward();
  EXPECT_THROW(scaler.unscale_(optimizer), std::invalid_argument) << "float16 gradients (use gradients_of())";
}

TEST(Lab03_GradScaler, GrowthStopsAtFloat32Overflow) {
  auto w = torch::tensor({1.0f}).requires_grad_();
  torch::optim::SGD optimizer({w}, torch::optim::SGDOptions(0.0));
  GradScalerOptions options;
  options.init_scale = std::ldexp(1.0, 127);  // the largest power of two in float32
  options.growth_interval = 1;
  GradScaler scaler(options);
  optimizer.zero_grad();
  scaler.scale(w.sum()).backward();
  EXPECT_TRUE(scaler.step(optimizer));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), std::ldexp(1.0, 127)) << "2^128 is inf in float32: no growth";
  EXPECT_EQ(scaler.get_growth_tracker(), 0);
}

TEST(Lab03_GradScaler, DisabledIsAPassThrough) {
  auto w = torch::tensor({1.0f, -2.0f}).requires_grad_();
  torch::optim::SGD optimizer({w}, torch::optim::SGDOptions(0.125));
  GradScalerOptions options;
  options.enabled = false;
  GradScaler scaler(options);
  EXPECT_FALSE(scaler.is_enabled());
  const auto loss = (w * torch::tensor({0.5f, 0.25f})).sum();
  const auto scaled = scaler.scale(loss);
  EXPECT_TRUE(scaled.is_same(loss)) << "a disabled scaler's scale() returns the loss itself";
  scaled.backward();
  scaler.unscale_(optimizer);
  EXPECT_TRUE(same(w.grad(), {0.5f, 0.25f}, "gradient after a disabled unscale_()"));
  EXPECT_TRUE(scaler.step(optimizer));
  scaler.update();
  EXPECT_TRUE(same(w.detach(), {0.9375f, -2.03125f}, "weights after a disabled step()"));
  EXPECT_EQ(scaler.get_scale(), 1.0);
  // Even inf gradients step: a disabled scaler never inspects them.
  optimizer.zero_grad();
  (w * torch::tensor({kInf, 1.0f})).sum().backward();
  EXPECT_TRUE(scaler.step(optimizer)) << "a disabled scaler always steps";
}

TEST(Lab03_GradScaler, StateRoundTripsThroughJson) {
  auto w = torch::tensor({1.0f, -2.0f}).requires_grad_();
  torch::optim::SGD optimizer({w}, torch::optim::SGDOptions(0.125));
  GradScaler scaler(reference_options());
  for (int step = 0; step < 2; ++step) {  // one clean step, one inf step: scale 512, tracker 0
    optimizer.zero_grad();
    scaler.scale((w * torch::tensor(kPython[step].x)).sum()).backward();
    scaler.step(optimizer);
    scaler.update();
  }
  optimizer.zero_grad();
  scaler.scale((w * torch::tensor({1.0f, 1.0f})).sum()).backward();
  scaler.step(optimizer);
  scaler.update();  // tracker 1
  const nlohmann::json saved = scaler.state_dict();
  const auto text = saved.dump();

  GradScaler restored;  // different defaults, all overwritten by the load
  restored.load_state_dict(nlohmann::json::parse(text).get<lab03::GradScalerState>());
  EXPECT_EQ(restored.get_scale(), 512.0);
  EXPECT_EQ(restored.get_growth_tracker(), 1);
  EXPECT_EQ(nlohmann::json(restored.state_dict()), saved);
  // The restored scaler continues the sequence: two more clean steps reach growth_interval 3 -> 1024.
  auto v = torch::tensor({1.0f}).requires_grad_();
  torch::optim::SGD other({v}, torch::optim::SGDOptions(0.0));
  for (int step = 0; step < 2; ++step) {
    other.zero_grad();
    restored.scale(v.sum()).backward();
    restored.step(other);
    restored.update();
  }
  EXPECT_EQ(restored.get_scale(), 1024.0) << "two clean steps after the restore reach growth_interval 3";
  EXPECT_EQ(restored.get_growth_tracker(), 0);
}

// --- mixed_precision_step --------------------------------------------------------------------------------

TEST(Lab03_mixed_precision_step, MatchesPythonAndRestoresAutocast) {
  // The first two rows of the Python reference: a clean step moves w to [0.9375, -2.03125], an inf step
  // is skipped and halves the scale 1024 -> 512. float16 autocast does not touch an elementwise mul+sum.
  auto w = torch::tensor({1.0f, -2.0f}).requires_grad_();
  torch::optim::SGD optimizer({w}, torch::optim::SGDOptions(0.125));
  GradScaler scaler(reference_options());
  auto x = torch::tensor({0.5f, 0.25f});
  bool autocast_was_on = false;
  const auto loss_fn = [&] {
    autocast_was_on = at::autocast::is_autocast_enabled(c10::kCPU);
    return (w * x).sum();
  };
  auto result = lab03::mixed_precision_step(loss_fn, optimizer, scaler, c10::kCPU, c10::kHalf);
  EXPECT_TRUE(autocast_was_on) << "the forward pass must run under autocast";
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::kCPU)) << "autocast must be off again after the step";
  EXPECT_TRUE(result.stepped);
  EXPECT_TRUE(numbers_close(result.loss, 0.0, 0, 0, "loss 1*0.5 + (-2)*0.25"));
  EXPECT_TRUE(same(w.detach(), {0.9375f, -2.03125f}, "weights after the clean step"));
  x = torch::tensor({kInf, 1.0f});
  result = lab03::mixed_precision_step(loss_fn, optimizer, scaler, c10::kCPU, c10::kHalf);
  EXPECT_FALSE(result.stepped) << "a step with an inf gradient must be skipped";
  EXPECT_TRUE(same(w.detach(), {0.9375f, -2.03125f}, "weights after the skipped step"));
  EXPECT_EQ(scaler.get_scale(), 512.0) << "the scale halves after the inf step";
}

TEST(Lab03_mixed_precision_step, RunsTheForwardInTheAutocastDtype) {
  torch::manual_seed(0);
  torch::nn::Linear layer(4, 2);
  torch::optim::SGD optimizer(layer->parameters(), torch::optim::SGDOptions(0.1));
  GradScalerOptions disabled;
  disabled.enabled = false;
  GradScaler scaler(disabled);
  c10::ScalarType seen = c10::kFloat;
  lab03::mixed_precision_step(
      [&] {
        const auto out = layer->forward(torch::ones({3, 4}));
        seen = out.scalar_type();
        return out.to(torch::kFloat).pow(2).mean();
      },
      optimizer, scaler, c10::kCPU, c10::kBFloat16);
  EXPECT_EQ(seen, c10::kBFloat16) << "the linear layer's output dtype inside the step";
  EXPECT_EQ(layer->weight.scalar_type(), c10::kFloat) << "master weights stay float32";
  EXPECT_EQ(layer->weight.grad().scalar_type(), c10::kFloat) << "their gradients are float32";
}

}  // namespace
