#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/errors.h"
#include "common/observations.h"

using speedlabs::Report;
using speedlabs::Verdict;

TEST(Observations, ExitCodeFollowsMustHoldVerdicts) {
  Report report("00_test", "cpu");
  report.check("a", "a holds", 1.0, "> 0", true);
  report.check("b", "b fails but need not hold", 0.0, "> 0", false, false);
  report.not_applicable("c", "needs a GPU", "ratio >= 100", "no CUDA GPU");
  EXPECT_EQ(report.exit_code(), 0);
  report.check("d", "d fails and must hold", 0.0, "> 0", false, true);
  EXPECT_EQ(report.exit_code(), 1);
}

TEST(Observations, DuplicateIdIsRejected) {
  Report report("00_test", "cpu");
  report.check("a", "claim", 1, "1", true);
  EXPECT_THROW(report.check("a", "claim", 1, "1", true), std::logic_error);
  EXPECT_THROW(report.at("missing"), std::out_of_range);
}

TEST(Observations, JsonHasTheContractFields) {
  Report report("00_test", "cpu (2 threads)");
  report.check("ratio", "a ratio", 3.5, ">= 3", true);
  report.not_applicable("gpu_only", "a GPU claim", ">= 100", "no CUDA GPU", true);
  const auto json = report.to_json();
  EXPECT_EQ(json["lab"], "00_test");
  EXPECT_EQ(json["device"], "cpu (2 threads)");
  EXPECT_FALSE(json["libtorch"].get<std::string>().empty());
  ASSERT_EQ(json["observations"].size(), 2u);
  const auto& first = json["observations"][0];
  EXPECT_EQ(first["id"], "ratio");
  EXPECT_EQ(first["claim"], "a ratio");
  EXPECT_DOUBLE_EQ(first["measured"].get<double>(), 3.5);
  EXPECT_EQ(first["expected"], ">= 3");
  EXPECT_EQ(first["verdict"], "holds");
  EXPECT_EQ(first["must_hold"], true);
  const auto& second = json["observations"][1];
  EXPECT_EQ(second["verdict"], "not_applicable");
  EXPECT_EQ(second["reason"], "no CUDA GPU");
}

TEST(Observations, TableShowsEveryIdAndVerdict) {
  Report report("00_test", "cpu");
  report.check("holds_id", "claim one", 1, "1", true);
  report.check("fails_id", "claim two", 2, "1", false);
  std::ostringstream out;
  report.print_table(out);
  const std::string text = out.str();
  EXPECT_NE(text.find("holds_id"), std::string::npos);
  EXPECT_NE(text.find("fails_id"), std::string::npos);
  EXPECT_NE(text.find("claim two"), std::string::npos);
  EXPECT_NE(text.find("FAILS"), std::string::npos);
}

TEST(Observations, AtomicWriteReplacesWholeFile) {
  const auto dir = std::filesystem::temp_directory_path() / "speedlabs_test_atomic";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "out.json").string();
  speedlabs::write_file_atomically(path, "first\n");
  speedlabs::write_file_atomically(path, "second\n");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "second\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove_all(dir);
}

TEST(Observations, UnwritablePathIsAUsageError) {
  EXPECT_THROW(speedlabs::require_writable("/nonexistent-folder/out.json"), speedlabs::UsageError);
}
