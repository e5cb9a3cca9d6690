/// @file labs/09_flash_attention/src/attention_backward.h
/// @brief The tiled attention's backward from the log-sum-exp, and the two passes as one autograd Function.
///
/// The backward of the written-out attention reads the T x T probabilities that its forward stored. The
/// tiled forward stored none: it kept only the output and one number per row, the log-sum-exp L_i. That is
/// enough, because every probability can be rebuilt from its score: P_ij = exp(S_ij - L_i). So the
/// backward recomputes the scores a tile at a time, as the forward did, and turns them into gradients on
/// the spot: more arithmetic, far fewer bytes.
#pragma once
#include <torch/torch.h>

#include <cstdint>

namespace lab09 {

/// The gradients of the attention's loss with respect to its three inputs.
struct AttentionGradients {
  torch::Tensor dq;  ///< d loss / d q, the shape of q
  torch::Tensor dk;  ///< d loss / d k
  torch::Tensor dv;  ///< d loss / d v
};

/// The backward of causal attention from its output and log-sum-exp, recomputing the scores tile by tile.
///
/// With S = q k^T / sqrt(d) (masked), P_ij = exp(S_ij - L_i) and dO the gradient of the output:
/// dV = P^T dO; dP = dO V^T; dS_ij = P_ij (dP_ij - D_i) with D_i = sum_d dO_id O_id (= sum_j P_ij dP_ij);
/// dQ = dS K / sqrt(d); dK = dS^T Q / sqrt(d). Each key block gathers its dK and dV over the query blocks
/// that can see it; dQ gathers over key blocks. No tile of P outlives the step that uses it.
/// @param q,k,v    the forward's inputs (B, n_head, T, head_size), float32
/// @param out      the forward's output
/// @param lse      the forward's log-sum-exp (B, n_head, T)
/// @param grad_out d loss / d out
/// @param q_tile   query rows per block (at least 1)
/// @param kv_tile  keys and values per block (at least 1)
AttentionGradients tiled_attention_backward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                            const torch::Tensor& out, const torch::Tensor& lse,
                                            const torch::Tensor& grad_out, int64_t q_tile, int64_t kv_tile);

/// Causal attention that autograd can differentiate: the forward is the exercise's tiled_attention_forward
/// (it saves q, k, v, the output and the log-sum-exp, nothing of size T x T), the backward is
/// tiled_attention_backward.
struct TiledAttentionFunction : public torch::autograd::Function<TiledAttentionFunction> {
  /// Runs the tiled forward and saves what the backward needs.
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v, int64_t q_tile, int64_t kv_tile);
  /// The gradients of q, k and v (none for the tile sizes).
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list grad_outputs);
};

/// TiledAttentionFunction::apply: causal attention, tiled, with a tiled backward.
/// @param q,k,v    (B, n_head, T, head_size), float32 on the CPU
/// @param q_tile   query rows per block
/// @param kv_tile  keys and values per block
torch::Tensor tiled_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t q_tile,
                              int64_t kv_tile);

}  // namespace lab09
