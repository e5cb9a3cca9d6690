// Lab 13's stream vocabulary: the small head's loss is the cross-entropy over the whole vocabulary of the
// embedding it hands the evaluator, and every token finds its row.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "common/errors.h"
#include "stream_vocab.h"

namespace {

constexpr int64_t kVocab = 50;
constexpr int64_t kWidth = 8;

// A stream that holds the even ids below 30 (15 seen tokens; the other 35 unseen).
std::vector<int32_t> even_stream() {
  std::vector<int32_t> ids;
  for (int repeat = 0; repeat < 3; ++repeat)
    for (int32_t id = 28; id >= 0; id -= 2) ids.push_back(id);
  return ids;
}

TEST(Lab13StreamVocabulary, EachSeenTokenHasItsOwnRowAndEveryUnseenOneTheSharedRow) {
  const lab13::StreamVocabulary vocabulary(even_stream(), kVocab);
  EXPECT_EQ(vocabulary.rows(), 16);
  const torch::Tensor rows = vocabulary.rows_of(torch::tensor({0, 2, 28, 1, 29, 49}, torch::kLong).view({2, 3}));
  EXPECT_TRUE(torch::equal(rows, torch::tensor({0, 1, 14, 15, 15, 15}, torch::kLong).view({2, 3})));
  EXPECT_THROW(lab13::StreamVocabulary({0, 50}, kVocab), speedlabs::UsageError);
}

// In float64 the two losses are the same sum in another order: they agree to rounding (1e-12 relative).
TEST(Lab13StreamVocabulary, TheSmallHeadsLossIsTheWholeVocabularysCrossEntropy) {
  const lab13::StreamVocabulary vocabulary(even_stream(), kVocab);
  torch::manual_seed(0);
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  const torch::Tensor embedding = torch::randn({vocabulary.rows(), kWidth}, f64);
  const torch::Tensor hidden = torch::randn({12, kWidth}, f64) * 3;
  const torch::Tensor targets = torch::randint(0, 15, {12}, torch::kLong) * 2;  // seen ids only
  const torch::Tensor full = vocabulary.full_embedding(embedding);
  ASSERT_EQ(full.sizes(), (std::vector<int64_t>{kVocab, kWidth}));
  EXPECT_TRUE(torch::equal(full[49], embedding[-1]));  // an unseen token reads the shared row
  const torch::Tensor whole = torch::nn::functional::cross_entropy(torch::matmul(hidden, full.t()), targets);
  const double small = vocabulary.loss(hidden, embedding, vocabulary.rows_of(targets)).item<double>();
  EXPECT_NEAR(small, whole.item<double>(), 1e-12 * whole.item<double>());
}

// With every token seen, the shared row carries no probability (its logit is -inf) and the loss is plain.
TEST(Lab13StreamVocabulary, AStreamThatHoldsEveryTokenGivesTheSharedRowNoMass) {
  std::vector<int32_t> all;
  for (int32_t id = 0; id < kVocab; ++id) all.push_back(id);
  const lab13::StreamVocabulary vocabulary(all, kVocab);
  torch::manual_seed(1);
  const torch::Tensor embedding = torch::randn({vocabulary.rows(), kWidth}, torch::kDouble);
  const torch::Tensor hidden = torch::randn({6, kWidth}, torch::kDouble);
  const torch::Tensor targets = torch::randint(0, kVocab, {6}, torch::kLong);
  const torch::Tensor plain =
      torch::nn::functional::cross_entropy(torch::matmul(hidden, embedding.slice(0, 0, kVocab).t()), targets);
  const torch::Tensor loss = vocabulary.loss(hidden, embedding, vocabulary.rows_of(targets));
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
  EXPECT_NEAR(loss.item<double>(), plain.item<double>(), 1e-12 * plain.item<double>());
}

}  // namespace
