/// @file labs/13_speedrun/src/task.h
/// @brief The speedrun's fixed task, nanoGPT's shakespeare_char: tiny shakespeare as characters, split 90/10, the
/// limits on the model, and the evaluator that decides a trainer's validation loss. None of it is the student's.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/gpt_config.h"
#include "common/tensor_file.h"

namespace lab13 {

/// Tiny shakespeare's distinct characters: the vocabulary of the task (ids 0 to 64, in byte order).
inline constexpr int64_t kVocabulary = 65;
/// The share of the characters that trains (the first 90%, as nanoGPT splits them); the rest validates.
inline constexpr double kTrainShare = 0.9;
/// The evaluator's context: it scores the validation split in windows of this many characters.
inline constexpr int64_t kEvalContext = 64;

/// Tiny shakespeare as character ids: each byte's rank among the text's distinct bytes, as nanoGPT's
/// shakespeare_char/prepare.py makes them. RuntimeFailure when the text does not hold kVocabulary symbols.
std::vector<int32_t> load_characters(const std::filesystem::path& data_dir);

/// The fixed split: the training stream (the first kTrainShare of the ids) and the validation split (the rest).
struct Split {
  std::shared_ptr<const std::vector<int32_t>> train;  ///< what a trainer is handed
  std::vector<int32_t> validation;                    ///< what only the evaluator reads
  int64_t train_begin = 0;                            ///< first id of the training stream in the whole
  int64_t train_end = 0;                              ///< one past its last
  int64_t validation_begin = 0;                       ///< first id of the validation split in the whole
  int64_t validation_end = 0;                         ///< one past its last
};

/// Splits @p ids as nanoGPT does: training [0, int(0.9 n)), validation the rest (the two share no id). Throws
/// speedlabs::UsageError when the validation split holds fewer than a window of kEvalContext + 1 ids.
Split split_tokens(const std::vector<int32_t>& ids);

/// The limits a trainer's model stays within (speedlabs::UsageError, exit 2, naming the limit, otherwise): at
/// most 6 layers, width 32 to 384 in heads of 8 to 64, a context of 64 to 256 (the evaluator's 64 must fit),
/// the task's kVocabulary characters, tied embeddings (the common GPT always ties them).
void require_within_limits(const speedlabs::gpt::GPTConfig& model);

/// Mean cross-entropy of a float32 GPT of size @p model, loaded with @p weights, over every window of
/// kEvalContext characters of @p validation, the whole split (no gradient, float32, the common GPT's own forward pass).
/// @return the loss; NaN when a weight is not finite (with @p problem saying which); throws
///         speedlabs::RuntimeFailure when a weight is missing, unknown or of the wrong shape
double evaluate(const speedlabs::gpt::GPTConfig& model, const speedlabs::gpt::NamedTensors& weights,
                const std::vector<int32_t>& validation, std::string& problem);

}  // namespace lab13
