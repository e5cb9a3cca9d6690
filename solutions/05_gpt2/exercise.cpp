// Lab 05 reference solution.
#include "exercise.h"

#include <cmath>
#include <limits>
#include <optional>

#include "common/autocast_guard.h"

namespace lab05 {

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t T = q.size(-2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  auto scores = torch::matmul(q, k.transpose(-2, -1)) * scale;  // (B, nh, T, T)
  const auto future = torch::ones({T, T}, q.options().dtype(torch::kBool)).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v);
}

torch::Tensor train_step(speedlabs::gpt::GPT& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x,
                         const torch::Tensor& y, speedlabs::Precision precision, lab03::GradScaler* scaler) {
  using speedlabs::Precision;
  TORCH_CHECK(precision != Precision::fp16 || scaler != nullptr, "train_step: fp16 needs a GradScaler");
  // TF32 is a matmul mode of float32 tensors, not a dtype: torch's "high" float32 matmul precision.
  speedlabs::MatmulPrecisionScope matmul(precision == Precision::tf32 ? "high" : "highest");
  std::optional<c10::ScalarType> autocast_dtype;
  if (precision == Precision::bf16) autocast_dtype = c10::kBFloat16;
  if (precision == Precision::fp16) autocast_dtype = c10::kHalf;
  torch::Tensor loss;
  {
    // Autocast covers the forward pass and the loss only; backward runs each op in its forward dtype.
    speedlabs::AutocastGuard autocast(x.device().type(), autocast_dtype.value_or(c10::kFloat),
                                      autocast_dtype.has_value());
    loss = model->forward(x, y).loss;
  }
  if (precision == Precision::fp16) {
    scaler->scale(loss).backward();  // float16 gradients this small would underflow without the scale
    scaler->step(optimizer);         // unscales, and skips the step if a gradient is inf or NaN
    scaler->update();
  } else {
    loss.backward();
    optimizer.step();
  }
  optimizer.zero_grad();
  return loss.detach().to(torch::kFloat);
}

}  // namespace lab05
