// common/process: children started from an argv vector, their exit, output, time limit and environment.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/errors.h"
#include "common/process.h"

namespace {

TEST(Process, ExitCodeAndOutput) {
  const auto result = speedlabs::run_process({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_FALSE(result.ok());
  EXPECT_NE(result.output.find("out"), std::string::npos);
  EXPECT_NE(result.output.find("err"), std::string::npos);
  EXPECT_EQ(result.describe(), "exit 3");
}

TEST(Process, ArgumentsAreNeverShellCode) {
  const auto marker = std::filesystem::temp_directory_path() / ("speedlabs-injected-" + std::to_string(getpid()));
  const std::string hostile = "x'; touch " + marker.string() + "; echo '";
  const auto result = speedlabs::run_process({"printf", "%s", hostile});
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(result.output, hostile);  // passed through unchanged, one argument
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(Process, InputEnvironmentAndTimeLimit) {
  speedlabs::ProcessOptions options;
  options.input = "hello";
  options.env = {{"SPEEDLABS_TEST_VALUE", "42"}};
  const auto echoed = speedlabs::run_process({"sh", "-c", "cat; printf %s \"$SPEEDLABS_TEST_VALUE\""}, options);
  EXPECT_EQ(echoed.output, "hello42");

  speedlabs::ProcessOptions limited;
  limited.timeout_s = 0.3;
  const auto slow = speedlabs::run_process({"sleep", "30"}, limited);
  EXPECT_TRUE(slow.timed_out);
  EXPECT_FALSE(slow.ok());
}

TEST(Process, MissingProgramIsAClearError) {
  EXPECT_THROW(speedlabs::run_process({"/nonexistent/program"}), speedlabs::RuntimeFailure);
}

}  // namespace
