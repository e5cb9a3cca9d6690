// Lab 05 exercise stubs: replace each body, then run ./lab test 05 (see README.md).
#include "exercise.h"

#include "common/errors.h"

namespace lab05 {

torch::Tensor causal_attention(const torch::Tensor& /*q*/, const torch::Tensor& /*k*/, const torch::Tensor& /*v*/) {
  // TODO(lab05): scores = q k^T / sqrt(head_size); mask the future (above the diagonal) with -inf;
  // softmax over the last dimension; multiply by v.
  speedlabs::not_implemented("05", "05_gpt2", "causal_attention");
}

speedlabs::gpt::StepPrecision precision_setup(speedlabs::Precision /*precision*/) {
  // TODO(lab05): fill a StepPrecision for each mode: the float32 matmul precision ("highest" or
  // "high"), the autocast dtype (none, bfloat16 or float16) and whether to scale the loss.
  speedlabs::not_implemented("05", "05_gpt2", "precision_setup");
}

}  // namespace lab05
