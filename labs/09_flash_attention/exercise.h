/// @file labs/09_flash_attention/exercise.h
/// @brief Lab 09 exercise: the softmax in one pass, and causal attention a tile at a time (FlashAttention's forward).
///
/// Stubs live in labs/09_flash_attention/exercise.cpp, the reference in solutions/09_flash_attention/exercise.cpp.
#pragma once
#include <torch/types.h>

#include <cstdint>

namespace lab09 {

/// The softmax over the last dimension, its normalizer found in one pass over the logits, a block at a time.
///
/// The textbook softmax reads each row twice before it can write anything: once for the maximum (subtracted
/// so that exp never overflows), once for the sum of exp(x - max). The online softmax reads the row once,
/// @p block columns at a time, keeping per row a running maximum m and a running sum l of exp(x - m). When a
/// block raises the maximum from m to m', the sum so far was taken against the old maximum, so it is
/// rescaled: l' = l * exp(m - m') + sum(exp(block - m')). At the end softmax(x) = exp(x - m) / l.
/// That rescaling is what lets attention consume keys a tile at a time (tiled_attention_forward).
/// Entries of -inf (masked) get probability 0; a row must hold at least one finite entry.
/// @param logits float32, any shape with at least one dimension; the softmax runs over the last one
/// @param block  columns read per step (at least 1; need not divide the row length)
/// @return       the probabilities, the shape and dtype of @p logits; equal to torch::softmax(logits, -1)
///               up to float32 rounding, and finite for logits of any size (no exp of a large number)
torch::Tensor online_softmax(const torch::Tensor& logits, int64_t block);

/// What the tiled forward returns: the attention output and what its backward needs to recompute it.
struct AttentionOutput {
  torch::Tensor out;  ///< (B, n_head, T, head_size): softmax(q k^T / sqrt(head_size) + causal mask) v
  torch::Tensor lse;  ///< (B, n_head, T), float32: log sum_j exp(score_ij) over the keys j <= i of row i
};

/// Causal self-attention computed a tile at a time, never holding more than one tile of scores per head.
///
/// The written-out attention (lab 05's causal_attention) builds the whole T x T matrix of scores, then its
/// softmax, then multiplies by v. Here each block of @p q_tile queries walks the blocks of @p kv_tile keys
/// and values up to the diagonal (causal: later blocks are all masked), computes that tile of scores,
/// and folds it into a running maximum, a running sum and a running output with the online softmax's
/// rescaling (see online_softmax). When the block's keys are done its output is the running output divided
/// by the running sum, and its log-sum-exp is max + log(sum). Memory beyond the result is a few tiles,
/// whatever T is.
/// @param q       queries (B, n_head, T, head_size), float32 on the CPU
/// @param k       keys, same shape
/// @param v       values, same shape
/// @param q_tile  query rows per block (at least 1; need not divide T)
/// @param kv_tile keys and values per block (at least 1; need not divide T)
/// @return        the output and the per-row log-sum-exp of the scaled, masked scores
AttentionOutput tiled_attention_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                        int64_t q_tile, int64_t kv_tile);

}  // namespace lab09
