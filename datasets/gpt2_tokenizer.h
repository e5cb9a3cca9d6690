/// @file gpt2_tokenizer.h
/// @brief GPT-2's byte-level BPE tokenizer, token for token the same as tiktoken's `gpt2` encoding.
///
/// Encoding is two steps. (1) Pre-tokenization cuts the text into pieces with GPT-2's pattern
/// \verbatim
/// '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
/// \endverbatim
/// (a hand-written scanner, no regex engine; \\p{L}, \\p{N} and \\s are tiktoken's own classes, tabulated in
/// gpt2_unicode_classes.inc). (2) Each piece's bytes are merged pairwise, always the adjacent pair whose
/// concatenation has the lowest rank (leftmost on ties), until no pair is a token (ranks from vocab.bpe, checked
/// against encoder.json: a token's rank is its id). A piece that is a token is that token. Within one call
/// each distinct piece is merged once (a word cache); a long piece is merged with a bucket queue, so a megabyte
/// of one character costs per byte what 64 KB does. datasets/README.md has the details.
///
/// Invalid UTF-8: the input is cut into maximal valid UTF-8 stretches and single invalid bytes;
/// each stretch is encoded as above, each invalid byte becomes the token of that one byte. So
/// encode never fails and decode(encode(bytes)) == bytes for every byte string.
#pragma once
#include <cstddef>
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

  /// encode()'s first step alone: the pieces GPT-2's pattern cuts @p text into, in order, as views into
  /// @p text; each invalid UTF-8 byte is a piece of its own. Concatenated they are @p text. For the tests
  /// and the benchmark: encode(text) == encode_pieces(pretokenize(text)).
  /// @param text the bytes to cut
  std::vector<std::string_view> pretokenize(std::string_view text) const;

  /// The number of pieces pretokenize() would give, without storing them: the scanner alone (the benchmark).
  /// @param text the bytes to cut
  size_t count_pieces(std::string_view text) const;

  /// What encode_pieces() did with each piece, counted (the benchmark's breakdown of encode()).
  struct PieceCounts {
    size_t pieces = 0;        ///< pieces encoded
    size_t single_bytes = 0;  ///< one-byte pieces (a table lookup, never cached)
    size_t cache_hits = 0;    ///< pieces found in the word cache
    size_t whole_tokens = 0;  ///< pieces, not found in the cache, that are one token
    size_t merged = 0;        ///< pieces, not found in the cache, merged pair by pair
    size_t merged_bytes = 0;  ///< the bytes of those
  };

  /// encode()'s second step alone: the ids of @p pieces, each encoded as encode() encodes a piece. With
  /// @p use_cache false every piece is looked up or merged anew (no word cache).
  /// @param pieces    byte strings, normally from pretokenize()
  /// @param use_cache whether a piece seen before in this call is copied instead of merged again
  /// @param counts    when not null, receives what was done with the pieces
  std::vector<int32_t> encode_pieces(const std::vector<std::string_view>& pieces, bool use_cache = true,
                                     PieceCounts* counts = nullptr) const;

  /// The SHA-256 of encoder.json and vocab.bpe together, identifying this vocabulary (cache keys).
  const std::string& fingerprint() const;

  GPT2Tokenizer(GPT2Tokenizer&&) noexcept;             ///< movable
  GPT2Tokenizer& operator=(GPT2Tokenizer&&) noexcept;  ///< movable
  ~GPT2Tokenizer();                                    ///< frees the tables

 private:
  struct Impl;
  explicit GPT2Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace datasets
