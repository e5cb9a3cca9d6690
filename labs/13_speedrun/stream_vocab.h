/// @file labs/13_speedrun/stream_vocab.h
/// @brief The training stream's own vocabulary: a head of S + 1 rows instead of GPT-2's 50,257 that still
/// computes the cross-entropy over the whole vocabulary, exactly.
///
/// Tiny shakespeare's training stream holds about 11,700 of GPT-2's 50,257 tokens; its targets never ask for any
/// other. A trainer's GPT can then keep one embedding row per seen token plus one row u that every unseen token
/// shares. Every unseen logit is the same h.u, so the softmax's denominator over the whole vocabulary is the sum
/// over the seen logits plus (V - S) e^(h.u): one extra logit, h.u + log(V - S). The head multiplies by S + 1
/// rows a position, AdamW updates S + 1 rows a step, and weights() hands the evaluator the full embedding with
/// u copied into each unseen token's row: the evaluator's float32 loss is the loss the trainer descended.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace lab13 {

/// The seen tokens of a training stream, and the shared row of the others.
class StreamVocabulary {
 public:
  /// @param stream     the training stream's token ids, each in [0, vocab_size)
  /// @param vocab_size V, the full vocabulary
  StreamVocabulary(const std::vector<int32_t>& stream, int64_t vocab_size);

  /// S + 1: the rows of the small embedding (the seen tokens in ascending id order, then the shared row).
  int64_t rows() const { return rows_; }

  /// Token ids of any shape -> their rows in the small embedding (the shared row, S, for an unseen token).
  torch::Tensor rows_of(const torch::Tensor& ids) const;

  /// Mean cross-entropy over the whole vocabulary.
  /// @param hidden    (N, C) final hidden states (any float type; the logits are taken in float32)
  /// @param embedding (S + 1, C) the small tied embedding
  /// @param targets   (N,) int64 target rows (rows_of the target ids)
  torch::Tensor loss(const torch::Tensor& hidden, const torch::Tensor& embedding, const torch::Tensor& targets) const;

  /// The (V, C) embedding the evaluator reads: each seen token's row, the shared row for every unseen one.
  /// @param embedding (S + 1, C) the small embedding
  torch::Tensor full_embedding(const torch::Tensor& embedding) const;

 private:
  torch::Tensor row_;     // (V,) int64: each token id's row
  torch::Tensor offset_;  // (S + 1,): 0 on each seen row's logit, log(V - S) on the shared row's
  int64_t rows_ = 0;
};

}  // namespace lab13
