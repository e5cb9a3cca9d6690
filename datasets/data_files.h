/// @file data_files.h
/// @brief Where the data lives and what it must be (manifest with SHA-256 sums).
///
/// The data directory is, in order: the `--data-dir` flag, the environment variable
/// `SPEEDLABS_DATA_DIR`, then `<checkout>/data` (git-ignored; `./lab setup` fills it through
/// scripts/driver/fetch-data.sh). The list of files, their canonical URLs and sums lives only in
/// datasets/manifest.tsv, which is compiled in here and read by the download script.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace datasets {

/// One file of the manifest.
struct DataFile {
  std::string relative_path;  ///< path under the data directory, e.g. "gpt2/vocab.bpe"
  std::string url;            ///< where scripts/driver/fetch-data.sh downloads it from
  std::string sha256;         ///< the true SHA-256 of its bytes, lowercase hex
};

/// Every file of datasets/manifest.tsv, in its order.
const std::vector<DataFile>& manifest();

/// Relative paths of the files in the manifest, for callers that should not spell them out.
inline constexpr const char* kShakespearePath = "tinyshakespeare/input.txt";  ///< tiny shakespeare
inline constexpr const char* kEncoderJsonPath = "gpt2/encoder.json";          ///< GPT-2 vocabulary
inline constexpr const char* kVocabBpePath = "gpt2/vocab.bpe";                ///< GPT-2 merges

/// The data directory: @p flag_value when not empty, else `$SPEEDLABS_DATA_DIR` when set and not
/// empty, else `<checkout>/data`. The directory is not checked here; require_file() does that.
/// @param flag_value the value of a `--data-dir` flag ("" when not given)
std::filesystem::path resolve_data_dir(const std::string& flag_value = "");

/// The SHA-256 of @p bytes as lowercase hex (OpenSSL's EVP interface).
/// @param bytes the data to hash
std::string sha256_hex(std::string_view bytes);

/// The SHA-256 of a file's bytes as lowercase hex; RuntimeFailure if it cannot be read.
/// @param path the file to hash
std::string sha256_file(const std::filesystem::path& path);

/// The path of a manifest file inside @p data_dir after checking that it is there and that its
/// SHA-256 is the manifest's. A file already verified with the same size and modification time is
/// not hashed again (a stamp in cache_dir() remembers it; an unwritable cache only costs the re-hash).
/// Throws speedlabs::RuntimeFailure naming the file and how to get it when missing or corrupt, and
/// speedlabs::UsageError when @p relative_path is not in the manifest.
/// @param data_dir      the data directory (see resolve_data_dir())
/// @param relative_path a path from the manifest, e.g. kShakespearePath
std::filesystem::path require_file(const std::filesystem::path& data_dir, const std::string& relative_path);

/// require_file() for every file of the manifest.
/// @param data_dir the data directory
void require_all_files(const std::filesystem::path& data_dir);

/// Where derived files (the verification stamp, token caches) go: `$SPEEDLABS_CACHE_DIR` when set,
/// else `<checkout>/.cache/datasets` (git-ignored). Never inside the data directory, which may be
/// shared or read-only. Created if needed; cached files are keyed by content, so any data directory
/// can share it.
std::filesystem::path cache_dir();

}  // namespace datasets
