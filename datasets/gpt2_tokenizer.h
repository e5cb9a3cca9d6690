/// @file gpt2_tokenizer.h
/// @brief GPT-2's byte-level BPE tokenizer, token for token the same as tiktoken's `gpt2` encoding.
///
/// Encoding is two steps. (1) Pre-tokenization cuts the text into pieces with GPT-2's pattern
/// \verbatim
/// '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
/// \endverbatim
/// (PCRE2 with Unicode classes and JIT; whitespace is Unicode's White_Space, as in tiktoken). (2) Each piece's bytes
/// are merged pairwise, always the adjacent pair whose concatenation has the lowest rank, until no pair is a token
/// (ranks from vocab.bpe, checked against encoder.json: a token's rank is its id).
///
/// Invalid UTF-8: the input is cut into maximal valid UTF-8 stretches and single invalid bytes;
/// each stretch is encoded as above, each invalid byte becomes the token of that one byte. So
/// encode never fails and decode(encode(bytes)) == bytes for every byte string.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace datasets {

/// The GPT-2 tokenizer (50,257 tokens: 256 bytes, 50,000 merges, `<|endoftext|>`).
/// Immutable after loading; encode() and decode() may be called from several threads at once.
class GPT2Tokenizer {
 public:
  static constexpr int32_t kEndOfText = 50256;  ///< the id of `<|endoftext|>`
  static constexpr int32_t kVocabSize = 50257;  ///< number of tokens

  /// Loads gpt2/encoder.json and gpt2/vocab.bpe from @p data_dir after verifying their SHA-256
  /// (RuntimeFailure naming the file when missing or corrupt).
  /// @param data_dir the data directory (see datasets::resolve_data_dir())
  static GPT2Tokenizer load(const std::filesystem::path& data_dir);

  /// Loads the tokenizer from two files without checking their sums; RuntimeFailure when they are
  /// malformed or disagree with each other.
  /// @param encoder_json the vocabulary: token string -> id, in GPT-2's byte-to-unicode spelling
  /// @param vocab_bpe    the merges, one pair a line after the `#version` line, in rank order
  static GPT2Tokenizer from_files(const std::filesystem::path& encoder_json, const std::filesystem::path& vocab_bpe);

  /// The token ids of @p text. Like tiktoken's `encode_ordinary`: the characters `<|endoftext|>`
  /// are text, never token 50256.
  /// @param text the bytes to encode (UTF-8; invalid bytes: see the file comment)
  std::vector<int32_t> encode(std::string_view text) const;

  /// Like encode(), but each literal `<|endoftext|>` in @p text becomes token kEndOfText
  /// (tiktoken's `encode(text, allowed_special="all")`).
  /// @param text the bytes to encode
  std::vector<int32_t> encode_allowing_special(std::string_view text) const;

  /// The bytes of @p ids concatenated (tiktoken's `decode_bytes`). A cut through a multi-byte
  /// character gives those bytes as they are. Throws speedlabs::UsageError for an id outside
  /// [0, kVocabSize).
  /// @param ids token ids
  std::string decode(const std::vector<int32_t>& ids) const;

  /// The bytes of one token. Throws speedlabs::UsageError for an id outside [0, kVocabSize).
  /// @param id a token id
  const std::string& token_bytes(int32_t id) const;

  /// The SHA-256 of encoder.json and vocab.bpe together, identifying this vocabulary (cache keys).
  const std::string& fingerprint() const;

  GPT2Tokenizer(GPT2Tokenizer&&) noexcept;             ///< movable
  GPT2Tokenizer& operator=(GPT2Tokenizer&&) noexcept;  ///< movable
  ~GPT2Tokenizer();                                    ///< frees the tables and the compiled pattern

 private:
  struct Impl;
  explicit GPT2Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace datasets
