// Lab 06 tests: a multi-tensor AdamW against libtorch's per-tensor torch::optim::AdamW, on any device.
#pragma once
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "tests/support/expect.h"

namespace lab06_test {

/// Runs @p Optimizer and torch::optim::AdamW side by side for five steps with the same random gradients
/// on @p device, from the same random weights of @p shapes, and expects the same weights after each
/// run, every weight moved, and every step counted.
template <typename Optimizer>
void expect_matches_torch_adamw(const c10::Device& device, const std::vector<std::vector<int64_t>>& shapes) {
  torch::manual_seed(0);
  const auto options = torch::TensorOptions().device(device);
  std::vector<torch::Tensor> initial, params, reference_params;
  for (const auto& shape : shapes) {
    initial.push_back(torch::randn(shape, options));
    params.push_back(initial.back().clone().requires_grad_(true));
    reference_params.push_back(initial.back().clone().requires_grad_(true));
  }
  const double lr = 1e-2;
  Optimizer optimizer(params, lr);
  torch::optim::AdamW reference(reference_params,
                                torch::optim::AdamWOptions(lr).betas({0.9, 0.999}).eps(1e-8).weight_decay(0.01));
  for (int step = 0; step < 5; ++step) {
    for (size_t i = 0; i < initial.size(); ++i) {
      const auto grad = torch::randn_like(initial[i]);
      params[i].mutable_grad() = grad.clone();
      reference_params[i].mutable_grad() = grad.clone();
    }
    optimizer.step();
    reference.step();
  }
  for (size_t i = 0; i < initial.size(); ++i) {
    // Same float32 formula, evaluated in a different order (lerp vs mul+add, one fused kernel vs ten):
    // a few float32 roundings (6e-8 relative each) per step, far below one step's size (lr = 1e-2).
    EXPECT_TRUE(
        speedlabs::testing::tensors_close(params[i], reference_params[i], /*atol=*/1e-6, /*rtol=*/1e-5,
                                          "param " + std::to_string(i) + " after 5 steps vs torch::optim::AdamW"));
    EXPECT_FALSE(torch::equal(params[i], initial[i])) << "param " << i << " was not updated";
    EXPECT_EQ(optimizer.step_counts()[i].template item<float>(), 5.0f) << "step count of param " << i;
  }
}

}  // namespace lab06_test
