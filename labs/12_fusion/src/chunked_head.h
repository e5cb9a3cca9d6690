/// @file labs/12_fusion/src/chunked_head.h
/// @brief The LM head and its cross-entropy, chunked: a torch::autograd::Function whose forward and backward
/// walk the tokens a chunk at a time (lab 12's exercise does one chunk), so no B*T x V tensor ever exists.
#pragma once
#include <torch/types.h>

#include <cstdint>

namespace lab12 {

/// mean_i cross_entropy(hidden_i @ weight^T, targets_i), computed a chunk of rows at a time.
///
/// The forward keeps hidden, weight, targets and one float32 log-sum-exp per row; the backward rebuilds
/// each chunk's logits from them (chunk_backward), writes that chunk's rows of the hidden states' gradient
/// and adds its share of the weight's gradient into one float32 (V, C) accumulator. The weight may also be
/// used elsewhere in the graph (GPT-2 ties it to the token embedding): autograd adds the two gradients.
/// @param hidden  (..., C) float32 or bfloat16; every leading dimension counts as rows (B, T -> B*T)
/// @param weight  (V, C), the dtype of @p hidden
/// @param targets (...) int64, the leading shape of @p hidden, each in [0, V)
/// @param chunk   rows per chunk, at least 1 (UsageError otherwise); need not divide the rows
/// @return        0-dim float32, the mean loss; differentiable with respect to hidden and weight
torch::Tensor chunked_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                    const torch::Tensor& targets, int64_t chunk);

/// The plain head for comparison: torch::linear then torch::nn::functional::cross_entropy (mean), as GPT::forward
/// computes its loss; the full (rows, V) logits and their log-softmax live until the backward.
torch::Tensor plain_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                  const torch::Tensor& targets);

}  // namespace lab12
