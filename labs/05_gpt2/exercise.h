/// @file labs/05_gpt2/exercise.h
/// @brief Lab 05 exercise: GPT-2's attention written out, and the training step in each precision mode.
///
/// The stubs are in labs/05_gpt2/exercise.cpp. The fp16 mode runs on lab 03's loss scaler (your
/// lab03::GradScaler, linked from labs/03_mixed_precision). Check your work with `./lab check 05`.
#pragma once
#include <torch/torch.h>

#include "common/gpt.h"
#include "common/precision.h"
#include "labs/03_mixed_precision/exercise.h"

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

/// One training step of GPT-2 in a precision mode (chapter 9, sections 2 to 4).
///
/// - fp32: float32 matmuls at torch's "highest" precision, no autocast.
/// - tf32: float32 tensors, but float32 matmuls may use TF32 tensor cores: matmul precision "high".
/// - bf16: the forward pass and the loss under autocast to bfloat16 (float32's exponent range: no scaling).
/// - fp16: the forward pass and the loss under autocast to float16; the loss scaled by @p scaler before
///   backward, the optimizer stepped through the scaler (skipped when a gradient is inf/NaN), the scale
///   updated. Only fp16 needs a scaler; the other modes take none (nullptr).
///
/// Backward runs outside autocast. After the optimizer step the gradients are zeroed. The matmul
/// precision in force before the call is restored after it. The weights stay float32 in every mode.
/// Apart from the scaler's one read in fp16, nothing waits for the device (no .item()), so that lab 06
/// can capture the step in a CUDA graph.
/// @param model      the model (on the batch's device)
/// @param optimizer  its optimizer
/// @param x          (B, T) input ids on the model's device
/// @param y          (B, T) target ids on the model's device
/// @param precision  the mode
/// @param scaler     lab 03's loss scaler: required in fp16 (c10::Error without one), nullptr in the other modes
/// @return the (unscaled) loss of the forward pass: a detached float32 0-dim tensor on the device
torch::Tensor train_step(speedlabs::gpt::GPT& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x,
                         const torch::Tensor& y, speedlabs::Precision precision, lab03::GradScaler* scaler = nullptr);

}  // namespace lab05
