// Lab 08 on a CUDA GPU: the caching allocator's statistics against the formulas, and checkpointing.
#include <gtest/gtest.h>

#include "common/device.h"
#include "experiment.h"

namespace {

constexpr int64_t kCudaRounding = 512;  // the caching allocator rounds every block up to 512 bytes

TEST(Lab08Gpu, WeightsGradientsAndAdamWStateMatchTheFormulasUpToRounding) {
  if (!speedlabs::cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  const c10::Device cuda(c10::kCUDA, 0);
  const auto shape = lab08::model_shape("tiny");
  const auto phases = lab08::measure_phases("tiny", {2, 32, std::nullopt, false}, cuda);
  EXPECT_GE(phases.weights, lab08::weights_bytes_formula(shape));
  EXPECT_LE(phases.weights, lab08::weights_bytes_formula(shape) + kCudaRounding * shape.tensors);
  EXPECT_GE(phases.grads(), lab08::grads_bytes_formula(shape));
  EXPECT_LE(phases.grads(), lab08::grads_bytes_formula(shape) + kCudaRounding * shape.tensors);
  EXPECT_GE(phases.adamw_state(), lab08::adamw_state_bytes_formula(shape));
  EXPECT_LE(phases.adamw_state(), lab08::adamw_state_bytes_formula(shape) + 2 * kCudaRounding * shape.tensors);
  ASSERT_TRUE(phases.reserved.has_value());
  EXPECT_GE(*phases.reserved, phases.after_step);  // the allocator holds at least what tensors hold
}

TEST(Lab08Gpu, CheckpointingLowersThePeakAndKeepsTheGradients) {
  if (!speedlabs::cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  const c10::Device cuda(c10::kCUDA, 0);
  const auto plain = lab08::measure_phases("tiny", {4, 128, std::nullopt, false}, cuda);
  const auto checkpointed = lab08::measure_phases("tiny", {4, 128, std::nullopt, true}, cuda);
  EXPECT_LT(checkpointed.backward_peak, plain.backward_peak);
  const auto parity = lab08::compare_checkpointed_step("tiny", 4, 128, cuda);
  // GPU float32 matmuls may pick other kernels in the recomputation's context: allow 1e-4 of the scale.
  EXPECT_LE(parity.max_grad_abs_error, 1e-4 * parity.max_grad_abs);
}

}  // namespace
