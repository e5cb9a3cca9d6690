/// @file labs/13_speedrun/task.h
/// @brief The speedrun's fixed task: the split of tiny shakespeare, the limits on the model, and the evaluator
/// that decides a trainer's validation loss. None of it is the student's.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/gpt_config.h"
#include "common/tensor_file.h"

namespace lab13 {

/// The validation split: the last this many tokens (+1, the last target) of tiny shakespeare.
inline constexpr int64_t kValidationTokens = 8192;
/// The evaluator's context: it scores the validation split in windows of this many tokens.
inline constexpr int64_t kEvalContext = 64;

/// The fixed split: the training stream (every token before the validation split) and the validation split.
struct Split {
  std::shared_ptr<const std::vector<int32_t>> train;  ///< what a trainer is handed
  std::vector<int32_t> validation;                    ///< what only the evaluator reads
  int64_t train_begin = 0;                            ///< first token of the training stream in the whole
  int64_t train_end = 0;                              ///< one past its last
  int64_t validation_begin = 0;                       ///< first token of the validation split in the whole
  int64_t validation_end = 0;                         ///< one past its last
};

/// Splits @p tokens: validation is the last kValidationTokens + 1 ids, training all the ids before them (the two
/// share no token). Throws speedlabs::UsageError when there are too few tokens for the split.
Split split_tokens(const std::vector<int32_t>& tokens);

/// The limits a trainer's model stays within (speedlabs::UsageError, exit 2, naming the limit, otherwise): at
/// most 6 layers, width 32 to 384 in heads of 8 to 64, a context of 64 to 256 (the evaluator's 64 must fit),
/// GPT-2's vocabulary, tied embeddings (the common GPT always ties them).
void require_within_limits(const speedlabs::gpt::GPTConfig& model);

/// Mean cross-entropy of a float32 GPT of size @p model, loaded with @p weights, over every window of
/// kEvalContext tokens of @p validation (no gradient, float32, the common GPT's own forward pass).
/// @return the loss; NaN when a weight is not finite (with @p problem saying which); throws
///         speedlabs::RuntimeFailure when a weight is missing, unknown or of the wrong shape
double evaluate(const speedlabs::gpt::GPTConfig& model, const speedlabs::gpt::NamedTensors& weights,
                const std::vector<int32_t>& validation, std::string& problem);

}  // namespace lab13
