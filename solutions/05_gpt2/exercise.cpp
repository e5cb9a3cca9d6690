// Lab 05 reference solution.
#include "exercise.h"

#include <cmath>

namespace lab05 {

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t T = q.size(-2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  auto scores = torch::matmul(q, k.transpose(-2, -1)) * scale;  // (B, nh, T, T)
  const auto future = torch::ones({T, T}, q.options().dtype(torch::kBool)).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v);
}

speedlabs::gpt::StepPrecision precision_setup(speedlabs::Precision precision) {
  speedlabs::gpt::StepPrecision setup;  // fp32: no autocast, "highest" matmuls, no scaling
  switch (precision) {
    case speedlabs::Precision::fp32:
      break;
    case speedlabs::Precision::tf32:
      setup.matmul_precision = "high";
      break;
    case speedlabs::Precision::bf16:
      setup.autocast_dtype = torch::kBFloat16;
      break;
    case speedlabs::Precision::fp16:
      setup.autocast_dtype = torch::kHalf;
      setup.scale_loss = true;
      break;
  }
  return setup;
}

}  // namespace lab05
