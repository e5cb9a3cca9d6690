// common/plot: gnuplot from an argv vector, file names as the script's arguments, the chart renamed into place.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/errors.h"
#include "common/files.h"
#include "common/plot.h"
#include "common/process.h"

namespace {

namespace fs = std::filesystem;

bool have_gnuplot() {
  try {
    return speedlabs::run_process({"gnuplot", "--version"}).ok();
  } catch (const speedlabs::RuntimeFailure&) {
    return false;
  }
}

class Plots : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
    // A quote and a space in the folder: names travel as data (ARG1, ARG2), never as gnuplot code.
    folder_ = fs::temp_directory_path() / ("speedlabs plot's-" + std::to_string(getpid()));
    fs::create_directories(folder_);
    speedlabs::write_file_atomically(
        (folder_ / "line.gp").string(),
        "set terminal svg\nset output ARG2\nset title ARG3\nplot ARG1 using 1:2 with lines\n");
  }
  void TearDown() override { fs::remove_all(folder_); }
  fs::path folder_;
};

TEST_F(Plots, TheChartAndItsDataLandBesideEachOtherAndNothingElse) {
  std::string failure;
  const std::string svg = speedlabs::plot_svg((folder_ / "line.gp").string(), folder_.string(), "chart",
                                              "0 1\n1 4\n2 9\n", {"a title with a ' quote"}, failure);
  ASSERT_EQ(failure, "");
  EXPECT_EQ(svg, (folder_ / "chart.svg").string());
  EXPECT_GT(fs::file_size(folder_ / "chart.svg"), 0u);
  EXPECT_EQ(speedlabs::read_file((folder_ / "chart.dat").string()), "0 1\n1 4\n2 9\n");
  int files = 0;
  for (const auto& entry : fs::directory_iterator(folder_)) files += entry.is_regular_file();
  EXPECT_EQ(files, 3) << "line.gp, chart.dat and chart.svg: no temporary file is left";
}

TEST_F(Plots, AFailingScriptSaysWhyAndLeavesNoChart) {
  std::string failure;
  EXPECT_EQ(
      speedlabs::plot_svg((folder_ / "line.gp").string(), folder_.string(), "chart", "not numbers\n", {"t"}, failure),
      "");
  EXPECT_NE(failure.find("gnuplot"), std::string::npos) << failure;
  EXPECT_FALSE(fs::exists(folder_ / "chart.svg"));
  EXPECT_EQ(speedlabs::run_gnuplot("", "this is not gnuplot\n", {}).find("gnuplot"), 0u);
  EXPECT_EQ(speedlabs::run_gnuplot("", "print ARG1\n", {"it's"}), "");
}

TEST_F(Plots, SeveralChartsFromOneScriptLandTogetherAndNothingElse) {
  std::string failure;
  const std::string script =
      "set terminal svg\nset output ARG1\nplot x\nunset output\nset output ARG2\nset title ARG3\nplot x*x\n";
  const auto written = speedlabs::write_svgs(script, folder_.string(), {"one", "two"}, {"it's a title"}, failure);
  ASSERT_EQ(failure, "");
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(written[1], (folder_ / "two.svg").string());
  int files = 0;
  for (const auto& entry : fs::directory_iterator(folder_)) files += entry.is_regular_file();
  EXPECT_EQ(files, 3) << "line.gp, one.svg and two.svg: no temporary file is left";
}

TEST_F(Plots, AChartIsNeverWrittenThroughALink) {
  // A link where the chart goes, pointing at a file the user owns: refused, the file untouched.
  const fs::path victim = folder_ / "victim.txt";
  speedlabs::write_file_atomically(victim.string(), "mine\n");
  fs::create_symlink(victim, folder_ / "chart.svg");
  std::string failure;
  EXPECT_THROW(
      speedlabs::write_svgs("set terminal svg\nset output ARG1\nplot x\n", folder_.string(), {"chart"}, {}, failure),
      speedlabs::RuntimeFailure);
  EXPECT_EQ(speedlabs::read_file(victim.string()), "mine\n");
  EXPECT_TRUE(fs::is_symlink(folder_ / "chart.svg"));
}

TEST_F(Plots, AChartCutShortReplacesNothing) {
  // gnuplot opens the output and stops before closing the SVG, as it does when the disk fills up: the run
  // fails, the earlier chart stays, and no temporary file is left.
  speedlabs::write_file_atomically((folder_ / "chart.svg").string(), "<svg>an earlier chart</svg>\n");
  std::string failure;
  EXPECT_THROW(speedlabs::write_svgs("set terminal svg\nset output ARG1\n", folder_.string(), {"chart"}, {}, failure),
               speedlabs::RuntimeFailure);
  EXPECT_EQ(speedlabs::read_file((folder_ / "chart.svg").string()), "<svg>an earlier chart</svg>\n");
  int files = 0;
  for (const auto& entry : fs::directory_iterator(folder_)) files += entry.is_regular_file();
  EXPECT_EQ(files, 2) << "line.gp and the earlier chart.svg";
}

}  // namespace
