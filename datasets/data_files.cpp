// Data directory resolution, SHA-256 verification with a stamp, and the token cache.
#include "datasets/data_files.h"

#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "common/errors.h"
#include "common/files.h"
#include "datasets/gpt2_tokenizer.h"

namespace datasets {

namespace fs = std::filesystem;
using speedlabs::RuntimeFailure;
using speedlabs::UsageError;

const std::vector<DataFile>& manifest() {
  static const std::vector<DataFile> files = {
#include "manifest.inc"
  };
  return files;
}

fs::path resolve_data_dir(const std::string& flag_value) {
  if (!flag_value.empty()) return fs::path(flag_value);
  if (const char* env = std::getenv("SPEEDLABS_DATA_DIR"); env != nullptr && *env != '\0') return fs::path(env);
  return fs::path(SPEEDLABS_SOURCE_DIR) / "data";
}

namespace {

struct DigestContextDeleter {
  void operator()(EVP_MD_CTX* context) const { EVP_MD_CTX_free(context); }
};

/// Incremental SHA-256, so a file is hashed without holding it in memory twice.
class Sha256 {
 public:
  Sha256() : context_(EVP_MD_CTX_new()) {
    if (!context_ || EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) != 1)
      throw RuntimeFailure("OpenSSL could not start a SHA-256 digest");
  }
  void update(const char* data, size_t size) {
    if (EVP_DigestUpdate(context_.get(), data, size) != 1) throw RuntimeFailure("OpenSSL SHA-256 update failed");
  }
  std::string hex() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int length = 0;
    if (EVP_DigestFinal_ex(context_.get(), digest.data(), &length) != 1)
      throw RuntimeFailure("OpenSSL SHA-256 final failed");
    static const char* const kHex = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < length; ++i) {
      out += kHex[digest[i] >> 4];
      out += kHex[digest[i] & 15];
    }
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, DigestContextDeleter> context_;
};

const DataFile& manifest_entry(const std::string& relative_path) {
  for (const DataFile& file : manifest())
    if (file.relative_path == relative_path) return file;
  throw UsageError("'" + relative_path + "' is not a file of datasets/manifest.tsv");
}

std::string how_to_get(const DataFile& file) {
  return "run ./lab setup to download it (from " + file.url +
         "), or set SPEEDLABS_DATA_DIR to a directory that holds a correct copy";
}

// What identifies one version of a file on disk, cheaply: if any of these change, hash it again. The status
// change time (ctime) is the one a user cannot set back: an edit in place that keeps the size and restores
// the modification time with touch or utime still moves it.
std::string file_identity(const fs::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return "";
  std::ostringstream key;
  key << fs::absolute(path).lexically_normal().string() << '\t' << info.st_size << '\t' << info.st_dev << ':'
      << info.st_ino << '\t' << info.st_mtim.tv_sec << '.' << info.st_mtim.tv_nsec << '\t' << info.st_ctim.tv_sec
      << '.' << info.st_ctim.tv_nsec;
  return key.str();
}

// The stamp: one line per verified file, "<sha256>\t<identity>".
std::map<std::string, std::string> read_stamp(const fs::path& stamp) {
  std::map<std::string, std::string> sum_by_identity;
  std::ifstream in(stamp);
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab != std::string::npos) sum_by_identity[line.substr(tab + 1)] = line.substr(0, tab);
  }
  return sum_by_identity;
}

void remember_verified(const std::string& identity, const std::string& sum) {
  const fs::path stamp = cache_dir() / "verified.tsv";
  std::map<std::string, std::string> sum_by_identity = read_stamp(stamp);
  sum_by_identity[identity] = sum;
  std::string text;
  for (const auto& [key, value] : sum_by_identity) text += value + '\t' + key + '\n';
  speedlabs::try_write_file_atomically(stamp, text);  // a stamp that cannot be written only costs a re-hash next time
}

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  Sha256 digest;
  digest.update(bytes.data(), bytes.size());
  return digest.hex();
}

std::string sha256_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeFailure("could not read '" + path.string() + "'");
  Sha256 digest;
  std::vector<char> buffer(1 << 16);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    digest.update(buffer.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw RuntimeFailure("could not read '" + path.string() + "'");
  return digest.hex();
}

fs::path cache_dir() {
  fs::path directory = fs::path(SPEEDLABS_SOURCE_DIR) / ".cache" / "datasets";
  if (const char* env = std::getenv("SPEEDLABS_CACHE_DIR"); env != nullptr && *env != '\0') directory = env;
  std::error_code error;
  fs::create_directories(directory, error);
  if (error || ::access(directory.c_str(), W_OK) != 0) {
    // A read-only checkout still works: derived files go to the temporary directory instead.
    directory = fs::temp_directory_path() / ("speedlabs-cache-" + std::to_string(::getuid()));
    fs::create_directories(directory, error);
  }
  return directory;
}

fs::path require_file(const fs::path& data_dir, const std::string& relative_path) {
  const DataFile& file = manifest_entry(relative_path);
  const fs::path path = data_dir / relative_path;
  std::error_code error;
  if (!fs::is_regular_file(path, error)) {
    throw RuntimeFailure("missing data file '" + path.string() + "' (data directory '" + data_dir.string() +
                         "'): " + how_to_get(file));
  }
  const std::string identity = file_identity(path);
  const auto verified = read_stamp(cache_dir() / "verified.tsv");
  if (const auto it = verified.find(identity); it != verified.end() && it->second == file.sha256) return path;

  const std::string actual = sha256_file(path);
  if (actual != file.sha256) {
    throw RuntimeFailure("corrupt data file '" + path.string() + "': SHA-256 " + actual + ", expected " +
                         file.sha256 + " (datasets/manifest.tsv). Delete it and " + how_to_get(file));
  }
  remember_verified(identity, actual);
  return path;
}

void require_all_files(const fs::path& data_dir) {
  for (const DataFile& file : manifest()) require_file(data_dir, file.relative_path);
}

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
