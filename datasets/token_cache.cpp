// The token cache: a text's ids in a file named by its path and keyed by its and the tokenizer's sums.
#include "datasets/token_cache.h"

#include <fstream>
#include <string>
#include <string_view>

#include "common/files.h"
#include "datasets/data_files.h"

namespace datasets {

namespace fs = std::filesystem;

namespace {

// Token cache file: magic, the text's SHA-256, the tokenizer's fingerprint and the SHA-256 of the body
// (64 hex each), the count (uint64), then the body: the ids as int32, all in this machine's byte order.
// The body's sum catches ids damaged on disk, which would otherwise look like valid tokens.
constexpr std::string_view kCacheMagic = "speedlabs-tokens-v2\n";
constexpr size_t kHexLength = 64;
constexpr size_t kHeaderSize = kCacheMagic.size() + 3 * kHexLength + sizeof(uint64_t);

std::string cache_header(const std::string& text_sum, const std::string& fingerprint, const std::string& body_sum,
                         uint64_t count) {
  std::string header(kCacheMagic);
  header += text_sum;
  header += fingerprint;
  header += body_sum;
  header.append(reinterpret_cast<const char*>(&count), sizeof(count));
  return header;
}

std::string_view as_bytes(const std::vector<int32_t>& ids) {
  return {reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int32_t)};
}

// The ids in a cache file written for exactly this text and tokenizer, or false.
bool read_token_cache(const fs::path& file, const std::string& text_sum, const std::string& fingerprint,
                      std::vector<int32_t>& ids) {
  std::error_code error;
  const auto size = fs::file_size(file, error);
  if (error || size < kHeaderSize || (size - kHeaderSize) % sizeof(int32_t) != 0) return false;
  const uint64_t count = (size - kHeaderSize) / sizeof(int32_t);
  std::ifstream in(file, std::ios::binary);
  std::string header(kHeaderSize, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header.size()))) return false;
  const std::string body_sum = header.substr(kCacheMagic.size() + 2 * kHexLength, kHexLength);
  if (header != cache_header(text_sum, fingerprint, body_sum, count)) return false;
  ids.resize(count);
  if (!in.read(reinterpret_cast<char*>(ids.data()), static_cast<std::streamsize>(count * sizeof(int32_t))))
    return false;
  return sha256_hex(as_bytes(ids)) == body_sum;
}

}  // namespace

TokenizedText load_tokens_cached(const GPT2Tokenizer& tokenizer, const fs::path& text_file,
                                 const fs::path& cache_directory) {
  const std::string text = speedlabs::read_file(text_file);
  const std::string text_sum = sha256_hex(text);
  // One cache file per text file (named by its path), so a changed text replaces its old ids.
  const std::string path_key = sha256_hex(fs::absolute(text_file).lexically_normal().string()).substr(0, 16);
  TokenizedText result;
  std::error_code error;
  fs::create_directories(cache_directory, error);
  const fs::path file = cache_directory / (text_file.stem().string() + "-" + path_key + ".gpt2-tokens");
  if (read_token_cache(file, text_sum, tokenizer.fingerprint(), result.ids)) {
    result.cache_file = file;
    result.from_cache = true;
    return result;
  }
  result.ids = tokenizer.encode(text);
  const std::string_view body = as_bytes(result.ids);
  std::string bytes = cache_header(text_sum, tokenizer.fingerprint(), sha256_hex(body), result.ids.size());
  bytes.append(body);
  if (speedlabs::try_write_file_atomically(file, bytes)) result.cache_file = file;
  return result;
}

TokenizedText load_shakespeare_tokens(const fs::path& data_dir) {
  const fs::path text = require_file(data_dir, kShakespearePath);
  const GPT2Tokenizer tokenizer = GPT2Tokenizer::load(data_dir);
  return load_tokens_cached(tokenizer, text, cache_dir());
}

}  // namespace datasets
