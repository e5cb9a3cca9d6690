// common/files: results replace a regular file or nothing; a folder, a link, a FIFO is refused, untouched.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "common/errors.h"
#include "common/files.h"

namespace fs = std::filesystem;

namespace {

class ResultFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = fs::temp_directory_path() / ("speedlabs-files-" + std::to_string(getpid()) + "-" +
                                           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(folder_);
  }
  void TearDown() override { fs::remove_all(folder_); }
  std::string at(const std::string& name) const { return (folder_ / name).string(); }
  fs::path folder_;
};

TEST_F(ResultFiles, ARegularFileIsReplacedWhole) {
  speedlabs::write_file_atomically(at("out.json"), "old");
  EXPECT_NO_THROW(speedlabs::require_writable(at("out.json")));
  speedlabs::write_file_atomically(at("out.json"), "new");
  EXPECT_EQ(speedlabs::read_file(at("out.json")), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(folder_), fs::directory_iterator()), 1);  // no temporaries left
}

TEST_F(ResultFiles, AFifoIsRefusedAndStaysAFifo) {
  ASSERT_EQ(mkfifo(at("pipe").c_str(), 0600), 0);
  EXPECT_THROW(speedlabs::require_writable(at("pipe")), speedlabs::UsageError);
  EXPECT_FALSE(speedlabs::try_write_file_atomically(at("pipe"), "x"));
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(at("pipe"))));
}

TEST_F(ResultFiles, ASymlinkIsRefusedAndItsTargetUntouched) {
  speedlabs::write_file_atomically(at("precious"), "keep me");
  fs::create_symlink(at("precious"), at("link"));
  EXPECT_THROW(speedlabs::require_writable(at("link")), speedlabs::UsageError);
  EXPECT_FALSE(speedlabs::try_write_file_atomically(at("link"), "x"));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(at("link"))));
  EXPECT_EQ(speedlabs::read_file(at("precious")), "keep me");
}

TEST_F(ResultFiles, AFolderOrAMissingFolderIsRefused) {
  EXPECT_THROW(speedlabs::require_writable(folder_.string()), speedlabs::UsageError);
  EXPECT_THROW(speedlabs::require_writable(at("no-such-folder/out.json")), speedlabs::UsageError);
  EXPECT_TRUE(fs::is_directory(folder_));
}

TEST_F(ResultFiles, AnOutputFolderIsCreatedOrMustBeAWritableFolder) {
  speedlabs::require_output_folder(at("plots/deeper"));
  EXPECT_TRUE(fs::is_directory(at("plots/deeper")));
  speedlabs::require_output_folder(at("plots"));  // an existing folder is fine
  speedlabs::write_file_atomically(at("a-file"), "keep me");
  EXPECT_THROW(speedlabs::require_output_folder(at("a-file")), speedlabs::UsageError);
  EXPECT_THROW(speedlabs::require_output_folder(at("a-file/below")), speedlabs::UsageError);
  EXPECT_EQ(speedlabs::read_file(at("a-file")), "keep me");
}

TEST(StreamPaths, DashAndStdoutAreStreams) {
  EXPECT_TRUE(speedlabs::is_stream_path("-"));
  EXPECT_TRUE(speedlabs::is_stream_path("/dev/stdout"));
  EXPECT_FALSE(speedlabs::is_stream_path("out.json"));
}

}  // namespace
