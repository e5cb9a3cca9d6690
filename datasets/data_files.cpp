// Data directory resolution and SHA-256 verification with a stamp.
#include "datasets/data_files.h"

#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "common/build_paths.h"
#include "common/errors.h"
#include "common/files.h"

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
  return fs::path(speedlabs::source_dir()) / "data";
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

// "" when @p path is a readable regular file (links followed), else what it is instead, for the message: a
// folder or a symbolic link loop is not "missing", and saying so spares a search for a download that worked.
std::string why_not_a_file(const fs::path& path) {
  const std::string quoted = "'" + path.string() + "'";
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return "missing data file " + quoted;
    return "data file " + quoted + " cannot be read: " + std::strerror(errno);
  }
  if (S_ISDIR(info.st_mode)) return "data file " + quoted + " is a folder, not a file";
  if (!S_ISREG(info.st_mode)) return "data file " + quoted + " is not a regular file";
  return "";
}

// What identifies one version of a file on disk, cheaply: if any of these change, hash it again. The status
// change time (ctime) is the one a user cannot set back: an edit in place that keeps the size and restores
// the modification time with touch or utime still moves it.
std::string file_identity(const fs::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return "";
  std::ostringstream key;
  key << fs::absolute(path).lexically_normal().string() << '\t' << info.st_size << '\t' << info.st_dev << ':'
      << info.st_ino << '\t' << info.st_mtim.tv_sec << '.' << info.st_mtim.tv_nsec << '\t' << info.st_ctim.tv_sec << '.'
      << info.st_ctim.tv_nsec;
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
  fs::path directory = fs::path(speedlabs::source_dir()) / ".cache" / "datasets";
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
  if (const std::string problem = why_not_a_file(path); !problem.empty()) {
    throw RuntimeFailure(problem + " (data directory '" + data_dir.string() + "'): " + how_to_get(file));
  }
  const std::string identity = file_identity(path);
  const auto verified = read_stamp(cache_dir() / "verified.tsv");
  if (const auto it = verified.find(identity); it != verified.end() && it->second == file.sha256) return path;

  const std::string actual = sha256_file(path);
  if (actual != file.sha256) {
    throw RuntimeFailure("corrupt data file '" + path.string() + "': SHA-256 " + actual + ", expected " + file.sha256 +
                         " (datasets/manifest.tsv). Delete it and " + how_to_get(file));
  }
  remember_verified(identity, actual);
  return path;
}

void require_all_files(const fs::path& data_dir) {
  for (const DataFile& file : manifest()) require_file(data_dir, file.relative_path);
}

}  // namespace datasets
