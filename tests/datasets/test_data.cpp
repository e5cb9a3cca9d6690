// Data directory, checksums, the token cache, the batch loader and the tokenize tool.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include "common/build_paths.h"
#include "common/errors.h"
#include "common/process.h"
#include "datasets/data_files.h"
#include "datasets/data_loader.h"
#include "datasets/gpt2_tokenizer.h"
#include "datasets/token_cache.h"
#include "tests/support/tokenizer.h"

namespace {

using speedlabs::testing::shared_tokenizer;

namespace fs = std::filesystem;
using speedlabs::RuntimeFailure;
using speedlabs::UsageError;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

/// Sets an environment variable for one scope, restoring it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? ::setenv(name, value->c_str(), 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

/// A fresh temporary directory, removed at the end of the test; derived files (stamp, token caches) go there too.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("speedlabs-datasets-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    cache_env_.emplace("SPEEDLABS_CACHE_DIR", (dir_ / "cache").string());
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::optional<ScopedEnv> cache_env_;
};

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const RuntimeFailure& e) {
    return e.what();
  }
  return "(no RuntimeFailure thrown)";
}

TEST(DataFiles, DataDirComesFromFlagThenEnvironmentThenCheckout) {
  {
    ScopedEnv env("SPEEDLABS_DATA_DIR", std::string("/from/env"));
    EXPECT_EQ(datasets::resolve_data_dir("/from/flag"), fs::path("/from/flag"));
    EXPECT_EQ(datasets::resolve_data_dir(), fs::path("/from/env"));
  }
  ScopedEnv env("SPEEDLABS_DATA_DIR", std::nullopt);
  EXPECT_EQ(datasets::resolve_data_dir(), fs::path(speedlabs::source_dir()) / "data");
  ScopedEnv empty("SPEEDLABS_DATA_DIR", std::string(""));
  EXPECT_EQ(datasets::resolve_data_dir(), fs::path(speedlabs::source_dir()) / "data");
}

TEST(DataFiles, ManifestListsTheThreeFilesWithTheirSums) {
  const auto& files = datasets::manifest();
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].relative_path, datasets::kShakespearePath);
  // The sum of ../shared/datasets/SHA256SUMS for tiny shakespeare.
  EXPECT_EQ(files[0].sha256, "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed");
  for (const auto& file : files) {
    EXPECT_EQ(file.sha256.size(), 64u) << file.relative_path;
    EXPECT_EQ(file.url.rfind("https://", 0), 0u) << file.relative_path;
  }
}

TEST(DataFiles, Sha256MatchesKnownDigests) {
  // FIPS 180-2 test vectors.
  EXPECT_EQ(datasets::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(datasets::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_F(TempDirTest, RealDataVerifies) {
  EXPECT_NO_THROW(datasets::require_all_files(datasets::resolve_data_dir()));
  // The second time the stamp answers; it must still name the files.
  EXPECT_NO_THROW(datasets::require_all_files(datasets::resolve_data_dir()));
  EXPECT_NE(read_bytes(dir_ / "cache" / "verified.tsv").find("input.txt"), std::string::npos);
}

TEST_F(TempDirTest, MissingFileNamesItAndHowToGetIt) {
  const std::string message = message_of([&] { datasets::require_file(dir_, datasets::kVocabBpePath); });
  EXPECT_NE(message.find((dir_ / "gpt2" / "vocab.bpe").string()), std::string::npos) << message;
  EXPECT_NE(message.find("./lab setup"), std::string::npos) << message;
  EXPECT_NE(message.find("SPEEDLABS_DATA_DIR"), std::string::npos) << message;
  EXPECT_THROW(datasets::require_file(dir_, "not/in/manifest.txt"), UsageError);
}

// A folder or a symbolic link loop where a data file should be is named for what it is, not "missing".
TEST_F(TempDirTest, AFolderOrALinkLoopIsNotCalledMissing) {
  fs::create_directories(dir_ / "gpt2" / "vocab.bpe");
  const std::string folder = message_of([&] { datasets::require_file(dir_, datasets::kVocabBpePath); });
  EXPECT_NE(folder.find("is a folder"), std::string::npos) << folder;
  EXPECT_EQ(folder.find("missing"), std::string::npos) << folder;
  fs::create_symlink("encoder.json", dir_ / "gpt2" / "encoder.json");  // points at itself
  const std::string loop = message_of([&] { datasets::require_file(dir_, datasets::kEncoderJsonPath); });
  EXPECT_NE(loop.find("cannot be read: Too many levels of symbolic links"), std::string::npos) << loop;
  EXPECT_EQ(loop.find("missing"), std::string::npos) << loop;
  EXPECT_NE(loop.find("./lab setup"), std::string::npos) << loop;
}

TEST_F(TempDirTest, CorruptCopyFailsTheChecksum) {
  const fs::path real = datasets::require_file(datasets::resolve_data_dir(), datasets::kShakespearePath);
  std::string text = read_bytes(real);
  const fs::path copy = dir_ / datasets::kShakespearePath;
  write_bytes(copy, text);
  EXPECT_NO_THROW(datasets::require_file(dir_, datasets::kShakespearePath));

  text[1000] ^= 1;                // one bit, same size
  write_bytes(copy, text + "!");  // and a changed size, so even a same-tick mtime cannot hide it
  const std::string message = message_of([&] { datasets::require_file(dir_, datasets::kShakespearePath); });
  EXPECT_NE(message.find("corrupt"), std::string::npos) << message;
  EXPECT_NE(message.find(copy.string()), std::string::npos) << message;
  EXPECT_NE(message.find(datasets::manifest()[0].sha256), std::string::npos) << message;
}

TEST_F(TempDirTest, AnEditInPlaceWithItsTimeRestoredIsStillCaught) {
  const fs::path real = datasets::require_file(datasets::resolve_data_dir(), datasets::kShakespearePath);
  std::string text = read_bytes(real);
  const fs::path copy = dir_ / datasets::kShakespearePath;
  write_bytes(copy, text);
  EXPECT_NO_THROW(datasets::require_file(dir_, datasets::kShakespearePath));  // verified: the stamp remembers it
  struct stat before {};
  ASSERT_EQ(::stat(copy.c_str(), &before), 0);

  // One byte changed in place (same size, same inode), then the modification time put back as it was.
  text[1000] = text[1000] == 'a' ? 'b' : 'a';
  {
    std::fstream out(copy, std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(1000);
    out.put(text[1000]);
  }
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, copy.c_str(), times, 0), 0);
  struct stat after {};
  ASSERT_EQ(::stat(copy.c_str(), &after), 0);
  ASSERT_EQ(after.st_size, before.st_size);
  ASSERT_EQ(after.st_ino, before.st_ino);
  ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);

  const std::string message = message_of([&] { datasets::require_file(dir_, datasets::kShakespearePath); });
  EXPECT_NE(message.find("corrupt"), std::string::npos) << message;
}

TEST_F(TempDirTest, TokenCacheIsReusedAndInvalidatedWhenTheTextChanges) {
  const fs::path text_file = dir_ / "text.txt";
  const fs::path cache = dir_ / "tokens";
  write_bytes(text_file, "To be, or not to be: that is the question.");
  const auto first = datasets::load_tokens_cached(shared_tokenizer(), text_file, cache);
  EXPECT_FALSE(first.from_cache);
  EXPECT_EQ(first.ids, shared_tokenizer().encode(read_bytes(text_file)));
  ASSERT_TRUE(fs::exists(first.cache_file));

  const auto second = datasets::load_tokens_cached(shared_tokenizer(), text_file, cache);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.ids, first.ids);

  // Ids damaged on disk (still valid token ids) fail the body's checksum: encoded afresh, not trusted.
  std::string bytes = read_bytes(first.cache_file);
  const int32_t planted = 42;
  std::memcpy(bytes.data() + bytes.size() - sizeof(int32_t), &planted, sizeof(planted));
  write_bytes(first.cache_file, bytes);
  const auto damaged = datasets::load_tokens_cached(shared_tokenizer(), text_file, cache);
  EXPECT_FALSE(damaged.from_cache);
  EXPECT_EQ(damaged.ids, first.ids);
  EXPECT_TRUE(datasets::load_tokens_cached(shared_tokenizer(), text_file, cache).from_cache);  // rewritten whole

  // A changed text has a new hash: encoded afresh, the cache rewritten.
  write_bytes(text_file, "Whether 'tis nobler in the mind to suffer");
  const auto changed = datasets::load_tokens_cached(shared_tokenizer(), text_file, cache);
  EXPECT_FALSE(changed.from_cache);
  EXPECT_EQ(changed.ids, shared_tokenizer().encode(read_bytes(text_file)));
  EXPECT_TRUE(datasets::load_tokens_cached(shared_tokenizer(), text_file, cache).from_cache);

  // A truncated cache file is ignored, not trusted.
  fs::resize_file(changed.cache_file, fs::file_size(changed.cache_file) - 2);
  const auto repaired = datasets::load_tokens_cached(shared_tokenizer(), text_file, cache);
  EXPECT_FALSE(repaired.from_cache);
  EXPECT_EQ(repaired.ids, changed.ids);
}

TEST_F(TempDirTest, ShakespeareTokensAreCached) {
  const auto first = datasets::load_shakespeare_tokens(datasets::resolve_data_dir());
  EXPECT_EQ(first.ids.size(), 338025u);
  const auto second = datasets::load_shakespeare_tokens(datasets::resolve_data_dir());
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.ids, first.ids);
  EXPECT_EQ(first.cache_file.parent_path(), dir_ / "cache");
}

std::vector<int32_t> iota_ids(int32_t n) {
  std::vector<int32_t> ids(n);
  for (int32_t i = 0; i < n; ++i) ids[i] = i;
  return ids;
}

TEST(DataLoaderLite, BatchesAreShiftedByOneAndWrapAround) {
  // 20 tokens, B=2, T=3: batches start at 0, 6, 12; the next one (18..24) would not fit.
  datasets::DataLoaderLite loader(iota_ids(20), 2, 3);
  EXPECT_EQ(loader.batches_per_epoch(), 3);
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (int64_t b = 0; b < 3; ++b) {
      EXPECT_EQ(loader.position(), 6 * b);
      const datasets::Batch batch = loader.next_batch();
      ASSERT_EQ(batch.x.sizes(), (std::vector<int64_t>{2, 3}));
      ASSERT_EQ(batch.y.sizes(), (std::vector<int64_t>{2, 3}));
      EXPECT_EQ(batch.x.scalar_type(), torch::kInt64);
      EXPECT_EQ(batch.x.index({0, 0}).item<int64_t>(), 6 * b);
      EXPECT_EQ(batch.x.index({1, 2}).item<int64_t>(), 6 * b + 5);
      EXPECT_TRUE(torch::equal(batch.y, batch.x + 1));
    }
    EXPECT_EQ(loader.position(), 0) << "wrapped after one epoch";
  }
}

TEST(DataLoaderLite, ExactFitAndDeterminism) {
  // 7 tokens hold exactly one 2x3 batch (6 inputs + 1 target).
  datasets::DataLoaderLite tight(iota_ids(7), 2, 3);
  EXPECT_EQ(tight.batches_per_epoch(), 1);
  const auto a = tight.next_batch();
  const auto b = tight.next_batch();
  EXPECT_TRUE(torch::equal(a.x, b.x));
  EXPECT_EQ(b.y.index({1, 2}).item<int64_t>(), 6);
}

TEST(DataLoaderLite, TooLittleDataIsAUsageError) {
  EXPECT_THROW(datasets::DataLoaderLite(iota_ids(6), 2, 3), UsageError);  // needs 7
  EXPECT_THROW(datasets::DataLoaderLite(iota_ids(100), 0, 3), UsageError);
  EXPECT_THROW(datasets::DataLoaderLite(iota_ids(100), 2, -1), UsageError);
  EXPECT_THROW(datasets::DataLoaderLite(iota_ids(100), int64_t{1} << 40, int64_t{1} << 40), UsageError);
}

TEST_F(TempDirTest, ShakespeareAtB4T128Has660Batches) {
  const auto tokens = datasets::load_shakespeare_tokens(datasets::resolve_data_dir());
  datasets::DataLoaderLite loader(tokens.ids, 4, 128);
  EXPECT_EQ(loader.batches_per_epoch(), 660);  // the chapter: 338025 // 512 = 660
  const auto first = loader.next_batch();
  EXPECT_EQ(first.x.index({0, 0}).item<int64_t>(), 5962);
  EXPECT_EQ(first.y.index({0, 0}).item<int64_t>(), 22307);
  for (int i = 1; i < 660; ++i) loader.next_batch();
  EXPECT_EQ(loader.position(), 0);
}

// The tokenize program, run as a learner would.
struct ProgramRun {
  int exit_code;
  std::string out;
};

ProgramRun run_tokenize(std::vector<std::string> arguments, const std::string& input = "") {
  arguments.insert(arguments.begin(), speedlabs::program_path("tokenize"));
  speedlabs::ProcessOptions options;
  options.input = input;
  const auto result = speedlabs::run_process(arguments, options);
  return {result.exit_code, result.output};
}

TEST_F(TempDirTest, TokenizeProgramEncodesDecodesAndCounts) {
  const fs::path text = dir_ / "in.txt";
  write_bytes(text, "Hello, world!");
  const ProgramRun encoded = run_tokenize({"encode", text.string()});
  EXPECT_EQ(encoded.exit_code, 0);
  EXPECT_EQ(encoded.out, "15496 11 995 0\n");
  EXPECT_EQ(run_tokenize({"encode", "--count", text.string()}).out, "4\n");

  const fs::path ids = dir_ / "ids.txt";
  write_bytes(ids, encoded.out);
  const ProgramRun decoded = run_tokenize({"decode", ids.string()});
  EXPECT_EQ(decoded.exit_code, 0);
  EXPECT_EQ(decoded.out, "Hello, world!");
  EXPECT_EQ(run_tokenize({"encode", "-"}, read_bytes(text)).out, encoded.out);
}

TEST_F(TempDirTest, TokenizeProgramRejectsBadInputWithExit2) {
  const fs::path ids = dir_ / "ids.txt";
  write_bytes(ids, "15496 eleven");
  EXPECT_EQ(run_tokenize({"decode", ids.string()}).exit_code, 2);
  write_bytes(ids, "50257");
  EXPECT_EQ(run_tokenize({"decode", ids.string()}).exit_code, 2);
  write_bytes(ids, "+5");
  EXPECT_EQ(run_tokenize({"decode", ids.string()}).exit_code, 2);
  EXPECT_EQ(run_tokenize({"encode", (dir_ / "absent.txt").string()}).exit_code, 2);
  // A folder is not an empty text.
  const ProgramRun folder = run_tokenize({"encode", dir_.string()});
  EXPECT_EQ(folder.exit_code, 2);
  EXPECT_NE(folder.out.find("is a folder"), std::string::npos) << folder.out;
  EXPECT_EQ(run_tokenize({"encode", "--count", dir_.string()}).exit_code, 2);
  const ProgramRun unknown = run_tokenize({"frobnicate", "x"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.out.find("unknown command 'frobnicate'"), std::string::npos) << unknown.out;
  EXPECT_EQ(run_tokenize({"encode"}).exit_code, 2);
  // Missing data is not the user's typo: exit 3, like a lab.
  EXPECT_EQ(run_tokenize({"--data-dir", (dir_ / "nothing").string(), "encode", ids.string()}).exit_code, 3);
}

}  // namespace
