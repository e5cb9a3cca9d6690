// Lab 06 tests on a CUDA GPU: the small training step that the graded test and the outside check capture in a
// CUDA graph with the student's capture_train_step.
#pragma once
#ifdef SPEEDLABS_TORCH_HAS_CUDA
#include <torch/torch.h>

#include <cstdint>

namespace lab06_test {

inline const c10::Device kCuda(c10::kCUDA, 0);

/// A 16 -> @p hidden -> 1 MLP with tanh on GPU 0, its weights drawn after torch::manual_seed(@p seed).
inline torch::nn::Sequential small_mlp(uint64_t seed = 0, int64_t hidden = 32) {
  torch::manual_seed(seed);
  torch::nn::Sequential mlp(torch::nn::Linear(16, hidden), torch::nn::Tanh(), torch::nn::Linear(hidden, 1));
  mlp->to(kCuda);
  return mlp;
}

/// One SGD step (no momentum: nothing read back to the host, so it can be captured), gradients zeroed.
inline torch::Tensor sgd_step(torch::nn::Sequential& mlp, torch::optim::SGD& optimizer, const torch::Tensor& x,
                              const torch::Tensor& y) {
  const auto loss = torch::mse_loss(mlp->forward(x), y);
  loss.backward();
  optimizer.step();
  optimizer.zero_grad();
  return loss.detach();
}

}  // namespace lab06_test
#endif
