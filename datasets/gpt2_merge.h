/// @file gpt2_merge.h
/// @brief BPE's merges for the GPT-2 tokenizer (internal to datasets/): the tables they need and the merging.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "datasets/gpt2_tables.h"

namespace datasets::gpt2_internal {

/// What merging needs of the vocabulary (GPT2Tokenizer::from_files() fills it), and the merging.
struct MergeTables {
  std::array<uint32_t, 256> byte_token{};  ///< byte -> the token of that one byte
  /// Two bytes -> the token they make together (0xFFFF: none): the first round of every merge, without hashing.
  std::vector<uint16_t> byte_pair = std::vector<uint16_t>(65536, 0xFFFF);
  /// Two bytes -> whether some token holds them side by side (0: merges never join across them).
  std::vector<uint8_t> joinable = std::vector<uint8_t>(65536, 0);
  PairTable pairs;  ///< two tokens -> the token they make together

  /// Pieces up to this many bytes are merged the simple way (rescanning all pairs after each merge, on the
  /// stack); longer
  /// ones are cut, and what stays long goes to a bucket queue, whose setup costs more but whose time grows
  /// linearly.
  static constexpr size_t kShortMerge = 48;
  /// A thread keeps the long merge's memory between calls up to pieces of this many bytes (about 30 MB).
  static constexpr size_t kKeptMerge = size_t{1} << 20;

  /// BPE proper: appends the ids merging gives @p piece (n >= 2 bytes): the adjacent pair whose bytes joined
  /// are the lowest-ranked token is merged, leftmost first, until no adjacent pair is a token. (Whether the
  /// whole piece is a token is the caller's question, asked first.)
  void merge(const uint8_t* piece, size_t n, std::vector<int32_t>& out) const;

 private:
  uint32_t first_round(uint8_t a, uint8_t b) const {
    const uint16_t merged = byte_pair[(size_t{a} << 8) | b];
    return merged == 0xFFFF ? kNoRank : merged;
  }
  void merge_short(const uint8_t* piece, size_t n, std::vector<int32_t>& out) const;
  void merge_segment(const uint8_t* segment, size_t n, std::vector<int32_t>& out) const;
};

}  // namespace datasets::gpt2_internal
