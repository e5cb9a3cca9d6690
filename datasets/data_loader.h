/// @file data_loader.h
/// @brief The chapter's DataLoaderLite: consecutive (x, y) batches of token ids, y shifted by one.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace datasets {

/// One training batch: inputs and the next-token targets.
struct Batch {
  torch::Tensor x;  ///< B x T int64 token ids
  torch::Tensor y;  ///< B x T int64 token ids: y[b][t] is the token after x[b][t]
};

/// Walks through the token ids in order, B*T at a time, and starts again at the beginning when the
/// next batch would run past the end (it needs B*T+1 tokens: one more for the last target).
/// Deterministic: the same ids, B and T give the same batches.
class DataLoaderLite {
 public:
  /// Throws speedlabs::UsageError when B or T is not positive or when B*T+1 tokens are more than
  /// there are.
  /// @param ids the token ids (e.g. datasets::load_shakespeare_tokens(...).ids, token_cache.h)
  /// @param batch_size B, sequences per batch
  /// @param sequence_length T, tokens per sequence
  DataLoaderLite(const std::vector<int32_t>& ids, int64_t batch_size, int64_t sequence_length);

  /// The batch at the current position; then advances by B*T, back to 0 when the next batch would
  /// not fit. The tensors are fresh copies on the CPU.
  Batch next_batch();

  /// Distinct batches before the loader wraps around: (tokens - 1) / (B*T). For tiny shakespeare at
  /// B=4, T=128 that is 660, the chapter's `len(tokens) // (B*T)` (the two differ only when B*T
  /// divides the number of tokens exactly).
  int64_t batches_per_epoch() const;

  /// Number of token ids held.
  int64_t num_tokens() const { return tokens_.numel(); }

  /// Index of the first token of the next batch.
  int64_t position() const { return position_; }

  /// Goes back to the first batch.
  void reset() { position_ = 0; }

  int64_t batch_size() const { return batch_size_; }            ///< B
  int64_t sequence_length() const { return sequence_length_; }  ///< T

 private:
  torch::Tensor tokens_;  // 1-D int64
  int64_t batch_size_;
  int64_t sequence_length_;
  int64_t position_ = 0;
};

}  // namespace datasets
