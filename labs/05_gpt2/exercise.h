/// @file labs/05_gpt2/exercise.h
/// @brief Lab 05 exercise: GPT-2's attention written out, and what each precision mode switches on.
///
/// Stubs live in labs/05_gpt2/exercise.cpp, the reference in solutions/05_gpt2/exercise.cpp.
#pragma once
#include <torch/torch.h>

#include "common/gpt.h"
#include "common/precision.h"

namespace lab05 {

/// Causal self-attention written out: softmax(q k^T / sqrt(head_size) + causal mask) v.
///
/// Position t may look at positions 0..t only, so the scores above the diagonal are set to -inf
/// before the softmax (their weights become exactly 0). The lab runs GPT-2 with this function in
/// place of libtorch's fused scaled_dot_product_attention, and the tests compare the two.
/// @param q queries (B, n_head, T, head_size)
/// @param k keys, same shape
/// @param v values, same shape
/// @return  (B, n_head, T, head_size): for each position, the attention-weighted sum of the values
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

/// What a training step switches on in each precision mode (chapter 9, sections 2 to 4).
///
/// - fp32: nothing; float32 matmuls at "highest" precision.
/// - tf32: float32 tensors, but float32 matmuls may use TF32 tensor cores: matmul precision "high".
/// - bf16: autocast to bfloat16 (float32's exponent range, so no loss scaling).
/// - fp16: autocast to float16 and scale the loss (float16 gradients underflow without it).
/// The weights stay float32 in every mode; only the step's arithmetic changes.
/// @param precision the mode
/// @return the step's settings, used by speedlabs::gpt::train_step
speedlabs::gpt::StepPrecision precision_setup(speedlabs::Precision precision);

}  // namespace lab05
