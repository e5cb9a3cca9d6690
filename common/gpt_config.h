/// @file gpt_config.h
/// @brief The size of a GPT-2 model, without the model: what code that only counts a model's parameters,
/// FLOPs or bytes needs, so it compiles without libtorch's nn headers (common/gpt.h has the model).
#pragma once
#include <cstdint>
#include <string>

namespace speedlabs::gpt {

/// The size of the model.
struct GPTConfig {
  int64_t block_size = 1024;   ///< longest sequence (rows of the position embedding)
  int64_t vocab_size = 50257;  ///< GPT-2's tokens: 256 bytes + 50,000 merges + <|endoftext|>
  int64_t n_layer = 12;        ///< transformer blocks
  int64_t n_head = 12;         ///< attention heads per block
  int64_t n_embd = 768;        ///< width of the residual stream

  /// GPT-2 small, 124M parameters: the chapter's model.
  static GPTConfig gpt2();
  /// Two narrow layers with the same vocabulary: runs on a CPU in seconds, for tests and --quick.
  static GPTConfig tiny();
  /// "gpt2" or "tiny"; throws UsageError for anything else.
  /// @param name the preset's name
  static GPTConfig by_name(const std::string& name);
  /// Throws UsageError unless sequences of @p seq tokens fit this model: 1 <= seq <= block_size (the rows of
  /// its position embedding). The one check of a sequence length, wherever it comes from.
  /// @param seq   the sequence length
  /// @param what  how the message names it, e.g. "--seq 2048" or "shape 4x2048"
  void require_sequence_fits(int64_t seq, const std::string& what) const;
};

}  // namespace speedlabs::gpt
