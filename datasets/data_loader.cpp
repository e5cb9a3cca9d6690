// The chapter's DataLoaderLite in libtorch.
#include "datasets/data_loader.h"

#include "common/errors.h"

namespace datasets {

DataLoaderLite::DataLoaderLite(const std::vector<int32_t>& ids, int64_t batch_size, int64_t sequence_length)
    : batch_size_(batch_size), sequence_length_(sequence_length) {
  if (batch_size < 1 || sequence_length < 1)
    throw speedlabs::UsageError("batch size and sequence length must be positive (got B=" + std::to_string(batch_size) +
                                ", T=" + std::to_string(sequence_length) + ")");
  // B*T+1 <= tokens, written so that a huge B*T cannot overflow: one more token for the last target.
  const int64_t available = static_cast<int64_t>(ids.size());
  if (available < 2 || batch_size > (available - 1) / sequence_length)
    throw speedlabs::UsageError("a batch of B=" + std::to_string(batch_size) + " x T=" +
                                std::to_string(sequence_length) + " needs B*T+1 tokens, but the data has only " +
                                std::to_string(available) + ": use a smaller batch or sequence length");
  tokens_ = torch::tensor(ids, torch::kInt32).to(torch::kInt64);
}

Batch DataLoaderLite::next_batch() {
  const int64_t span = batch_size_ * sequence_length_;
  const torch::Tensor window = tokens_.slice(0, position_, position_ + span + 1);
  Batch batch{window.slice(0, 0, span).reshape({batch_size_, sequence_length_}).clone(),
              window.slice(0, 1, span + 1).reshape({batch_size_, sequence_length_}).clone()};
  position_ += span;
  if (position_ + span + 1 > num_tokens()) position_ = 0;
  return batch;
}

int64_t DataLoaderLite::batches_per_epoch() const { return (num_tokens() - 1) / (batch_size_ * sequence_length_); }

}  // namespace datasets
