// GradScaler against the numbers Python's torch.amp.GradScaler gives for the same sequence.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "common/grad_scaler.h"

namespace {

using speedlabs::GradScaler;
using speedlabs::GradScalerOptions;

// One row of tests/reference/grad_scaler_reference.py's output (torch 2.13.0, CPU, run with
// /work/main/.venv/bin/python tests/reference/grad_scaler_reference.py). w = [1, -2], SGD lr 0.125,
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

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

const std::vector<PythonRow> kPython = {
    {{0.5f, 0.25f}, {512, 256}, {0.5f, 0.25f}, true, {0.9375f, -2.03125f}, 1024, 1},
    {{kInf, 1}, {kInf, 1024}, {kInf, 1}, false, {0.9375f, -2.03125f}, 512, 0},
    {{kNaN, 1}, {kNaN, 512}, {kNaN, 1}, false, {0.9375f, -2.03125f}, 256, 0},
    {{0.5f, 0.25f}, {128, 64}, {0.5f, 0.25f}, true, {0.875f, -2.0625f}, 256, 1},
    {{1, 1}, {256, 256}, {1, 1}, true, {0.75f, -2.1875f}, 256, 2},
    {{0.25f, 0.5f}, {64, 128}, {0.25f, 0.5f}, true, {0.71875f, -2.25f}, 512, 0},
    {{2, 0.5f}, {1024, 256}, {2, 0.5f}, true, {0.46875f, -2.3125f}, 512, 1},
};

void expect_same(const torch::Tensor& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    const float a = actual[i].item<float>();
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(a)) << "element " << i;
    } else {
      EXPECT_EQ(a, expected[i]) << "element " << i;
    }
  }
}

GradScalerOptions reference_options() {
  GradScalerOptions options;
  options.init_scale = 1024;
  options.growth_interval = 3;
  return options;
}

TEST(GradScaler, DefaultsAreTorchAmpGradScalers) {
  const GradScalerOptions options;
  EXPECT_EQ(options.init_scale, 65536.0);
  EXPECT_EQ(options.growth_factor, 2.0);
  EXPECT_EQ(options.backoff_factor, 0.5);
  EXPECT_EQ(options.growth_interval, 2000);
  EXPECT_TRUE(options.enabled);
  GradScaler scaler;
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  EXPECT_TRUE(scaler.is_enabled());
}

TEST(GradScaler, FollowsPythonsSequenceExactly) {
  auto w = torch::tensor({1.0f, -2.0f}).requires_grad_();
  torch::optim::SGD optimizer({w}, torch::optim::SGDOptions(0.125));
  GradScaler scaler(reference_options());
  for (size_t step = 0; step < kPython.size(); ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const auto& row = kPython[step];
    optimizer.zero_grad();
    const auto loss = (w * torch::tensor(row.x)).sum();
    scaler.scale(loss).backward();
    expect_same(w.grad(), row.scaled_grad);
    scaler.unscale_(optimizer);
    expect_same(w.grad(), row.unscaled_grad);
    EXPECT_EQ(scaler.step(optimizer), row.stepped);
    scaler.update();
    expect_same(w.detach(), row.w);
    EXPECT_EQ(scaler.get_scale(), row.scale);
    EXPECT_EQ(scaler.get_growth_tracker(), row.growth_tracker);
  }
  // Python's final state_dict: scale 512, growth_factor 2, backoff_factor 0.5, growth_interval 3, tracker 1.
  const nlohmann::json state = scaler.state_dict();
  EXPECT_EQ(state, nlohmann::json({{"scale", 512.0}, {"growth_factor", 2.0}, {"backoff_factor", 0.5},
                                   {"growth_interval", 3}, {"_growth_tracker", 1}}));
}

TEST(GradScaler, StepWithoutUnscaleUnscalesItself) {
  auto w = torch::tensor({1.0f, -2.0f}).requires_grad_();
  torch::optim::SGD optimizer({w}, torch::optim::SGDOptions(0.125));
  GradScaler scaler(reference_options());
  scaler.scale((w * torch::tensor({0.5f, 0.25f})).sum()).backward();
  EXPECT_TRUE(scaler.step(optimizer));
  scaler.update();
  expect_same(w.detach(), kPython[0].w);
}

TEST(GradScaler, MisuseIsRejected) {
  auto w = torch::tensor({1.0f}).requires_grad_();
  torch::optim::SGD optimizer({w}, torch::optim::SGDOptions(0.1));
  GradScaler scaler;
  EXPECT_THROW(scaler.update(), std::logic_error);  // nothing recorded yet
  scaler.scale(w.sum()).backward();
  scaler.unscale_(optimizer);
  EXPECT_THROW(scaler.unscale_(optimizer), std::logic_error);
  scaler.step(optimizer);
  EXPECT_THROW(scaler.step(optimizer), std::logic_error);
  scaler.update();
  EXPECT_THROW(GradScaler(GradScalerOptions{65536, 1.0, 0.5, 2000, true}), std::invalid_argument);
}

TEST(GradScaler, RefusesHalfGradients) {
  auto w = torch::ones({2}, torch::kHalf).requires_grad_();
  torch::optim::SGD optimizer({w}, torch::optim::SGDOptions(0.1));
  GradScaler scaler;
  scaler.scale(w.sum()).backward();
  EXPECT_THROW(scaler.unscale_(optimizer), std::invalid_argument);
}

TEST(GradScaler, GrowthStopsAtFloat32Overflow) {
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
  EXPECT_EQ(scaler.get_scale(), std::ldexp(1.0, 127));  // 2^128 is inf in float32: no growth
  EXPECT_EQ(scaler.get_growth_tracker(), 0);
}

TEST(GradScaler, DisabledIsAPassThrough) {
  auto w = torch::tensor({1.0f, -2.0f}).requires_grad_();
  torch::optim::SGD optimizer({w}, torch::optim::SGDOptions(0.125));
  GradScalerOptions options;
  options.enabled = false;
  GradScaler scaler(options);
  EXPECT_FALSE(scaler.is_enabled());
  const auto loss = (w * torch::tensor({0.5f, 0.25f})).sum();
  const auto scaled = scaler.scale(loss);
  EXPECT_TRUE(scaled.is_same(loss));
  scaled.backward();
  scaler.unscale_(optimizer);
  expect_same(w.grad(), {0.5f, 0.25f});
  EXPECT_TRUE(scaler.step(optimizer));
  scaler.update();
  expect_same(w.detach(), {0.9375f, -2.03125f});
  EXPECT_EQ(scaler.get_scale(), 1.0);
  // Even inf gradients step: a disabled scaler never inspects them.
  optimizer.zero_grad();
  (w * torch::tensor({kInf, 1.0f})).sum().backward();
  EXPECT_TRUE(scaler.step(optimizer));
}

TEST(GradScaler, StateRoundTripsThroughJson) {
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
  restored.load_state_dict(nlohmann::json::parse(text).get<speedlabs::GradScalerState>());
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
  EXPECT_EQ(restored.get_scale(), 1024.0);
  EXPECT_EQ(restored.get_growth_tracker(), 0);
}

}  // namespace
