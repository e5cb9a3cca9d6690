/// @file token_cache.h
/// @brief A text's GPT-2 token ids, encoded once and kept in cache_dir() for the next run.
///
/// Its own file so the data files (manifest, sums) need not know the tokenizer, which itself needs them.
#pragma once
#include <cstdint>
#include <filesystem>
#include <vector>

#include "datasets/gpt2_tokenizer.h"

namespace datasets {

/// Token ids of a text file and where they came from.
struct TokenizedText {
  std::vector<int32_t> ids;          ///< the GPT-2 token ids of the whole file
  std::filesystem::path cache_file;  ///< the cache file read or written ("" when none could be written)
  bool from_cache = false;           ///< true when the ids were read from cache_file, not encoded now
};

/// Encodes @p text_file with @p tokenizer, or reads the ids from a cache file in @p cache_directory
/// computed earlier. The cache file's name carries the SHA-256 of the text, so a changed text never
/// reuses old ids; the file is written through a temporary file and a rename. A cache that cannot
/// be written is not an error (the ids are still returned); an unreadable or malformed one is
/// ignored and rewritten.
/// @param tokenizer        the tokenizer (its files' sums are part of the cache key)
/// @param text_file        the text to encode
/// @param cache_directory  where the cache files live (created if needed)
TokenizedText load_tokens_cached(const GPT2Tokenizer& tokenizer, const std::filesystem::path& text_file,
                                 const std::filesystem::path& cache_directory);

/// Tiny shakespeare as GPT-2 token ids (338,025 of them), verified and cached: the C++ form of the
/// chapter's `tiktoken.get_encoding('gpt2').encode(open('input.txt').read())`.
/// @param data_dir the data directory (see resolve_data_dir())
TokenizedText load_shakespeare_tokens(const std::filesystem::path& data_dir);

}  // namespace datasets
