#include "stream_vocab.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "common/errors.h"

namespace lab13 {

StreamVocabulary::StreamVocabulary(const std::vector<int32_t>& stream, int64_t vocab_size) {
  std::vector<char> seen(static_cast<size_t>(vocab_size), 0);
  for (int32_t token : stream) {
    if (token < 0 || token >= vocab_size) {
      throw speedlabs::UsageError("token id " + std::to_string(token) + " is outside the vocabulary of " +
                                  std::to_string(vocab_size));
    }
    seen[static_cast<size_t>(token)] = 1;
  }
  const int64_t seen_count = std::count(seen.begin(), seen.end(), 1);
  std::vector<int64_t> rows(seen.size(), seen_count);  // the shared row, unless seen
  for (size_t id = 0, next = 0; id < seen.size(); ++id) {
    if (seen[id]) rows[id] = static_cast<int64_t>(next++);
  }
  row_ = torch::tensor(rows);
  rows_ = seen_count + 1;
  offset_ = torch::zeros({rows_}, torch::kDouble);  // in the logits' type when added
  const int64_t unseen = vocab_size - seen_count;
  // No unseen token: the shared row carries no probability at all.
  offset_[-1] = unseen > 0 ? std::log(static_cast<double>(unseen)) : -std::numeric_limits<double>::infinity();
}

torch::Tensor StreamVocabulary::rows_of(const torch::Tensor& ids) const {
  return row_.index_select(0, ids.flatten()).view(ids.sizes());
}

torch::Tensor StreamVocabulary::loss(const torch::Tensor& hidden, const torch::Tensor& embedding,
                                     const torch::Tensor& targets) const {
  // (N, S + 1): the seen logits, and h.u + log(V - S) standing for the V - S equal unseen ones; at least float32
  // (under bf16 autocast the matmul's result is bf16, too coarse for log(V - S) ~ 10.5: steps of 0.06).
  const torch::Tensor products = torch::nn::functional::linear(hidden, embedding);
  const torch::ScalarType type = c10::promoteTypes(products.scalar_type(), torch::kFloat);
  const torch::Tensor logits = products.to(type) + offset_.to(type);
  return torch::nn::functional::cross_entropy(logits, targets);
}

torch::Tensor StreamVocabulary::full_embedding(const torch::Tensor& embedding) const {
  return embedding.index_select(0, row_);
}

}  // namespace lab13
