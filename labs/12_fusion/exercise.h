/// @file labs/12_fusion/exercise.h
/// @brief Lab 12 exercise: one chunk of the chunked linear + cross-entropy, forward and backward, so that
/// the B*T x V logits never exist at once.
///
/// The stubs are in labs/12_fusion/exercise.cpp, the reference in solutions/12_fusion/exercise.cpp.
/// chunked_head.h wraps the two in a torch::autograd::Function that walks the tokens chunk by chunk.
/// Check your work with `./lab check 12`.
#pragma once
#include <torch/types.h>

namespace lab12 {

/// What the forward keeps of one chunk: the loss summed over its rows, and one number per row for the backward.
struct ChunkForward {
  torch::Tensor loss_sum;  ///< 0-dim float32: sum over the chunk's rows of (lse_i - logit_i[target_i])
  torch::Tensor lse;       ///< (rows,) float32: log sum_v exp(logit_iv), each row's log-sum-exp
};

/// The forward of the language-model head and the cross-entropy, for one chunk of rows (tokens).
///
/// The chunk's logits are hidden @ weight^T, (rows, V). The cross-entropy of row i is
/// lse_i - logit_i[target_i], with lse_i = log sum_v exp(logit_iv). Only the loss and the log-sum-exp leave this
/// function: the logits are freed when it returns, and the backward rebuilds them from hidden, weight and lse.
/// @param hidden  (rows, C): the chunk's final hidden states, float32 or bfloat16
/// @param weight  (V, C): the LM head's weight, the dtype of @p hidden
/// @param targets (rows,) int64, each in [0, V)
/// @return        the summed loss and the log-sum-exp of each row, in float32 whatever the input dtype (the
///                logits are made in the input dtype, as libtorch's linear makes them, then widened)
ChunkForward chunk_forward(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets);

/// The backward of one chunk: the gradient of its hidden states returned, the weight's accumulated.
///
/// With p_iv = exp(logit_iv - lse_i) (the softmax, rebuilt from the logits and the saved lse), the gradient of
/// the loss with respect to the logits is dlogit_iv = grad_scale * (p_iv - [v == target_i]). Then
/// d hidden = dlogits @ weight and d weight += dlogits^T @ hidden.
/// @param hidden      (rows, C), as given to chunk_forward
/// @param weight      (V, C), as given to chunk_forward
/// @param targets     (rows,) int64
/// @param lse         (rows,) float32, chunk_forward's log-sum-exp of these rows
/// @param grad_scale  0-dim float32 on the device: the loss's gradient over the number of rows of the
///                    whole batch (the loss is a mean), the same for every chunk
/// @param grad_weight (V, C) float32, accumulated in place: this chunk's dlogits^T @ hidden is added to it
/// @return            (rows, C), the gradient of the loss with respect to @p hidden, in hidden's dtype
torch::Tensor chunk_backward(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets,
                             const torch::Tensor& lse, const torch::Tensor& grad_scale, torch::Tensor& grad_weight);

}  // namespace lab12
