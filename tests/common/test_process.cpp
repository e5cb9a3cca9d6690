// common/process: children started from an argv vector, their exit, output, time limit and environment.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

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

// SIGTERM (or Ctrl-C) to the lab while a child runs: the child and everything in its process group (here a
// grandchild) are ended and waited for at once, and run_process says it was interrupted. In a death test's
// own process, since the stop request, once made, lasts for the life of the process.
TEST(Process, AStopRequestEndsTheChildAndItsGroup) {
  const auto pid_file = std::filesystem::temp_directory_path() / ("speedlabs-grandchild-" + std::to_string(getpid()));
  EXPECT_EXIT(
      {
        speedlabs::install_stop_handlers();
        std::thread signaller([] {
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
          kill(getpid(), SIGTERM);
        });
        const auto start = std::chrono::steady_clock::now();
        const auto result =
            speedlabs::run_process({"sh", "-c", "sleep 60 & echo $! > \"$0\"; wait", pid_file.string()});
        const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        signaller.join();
        pid_t grandchild = 0;
        std::ifstream(pid_file) >> grandchild;
        std::filesystem::remove(pid_file);
        bool grandchild_ended = false;  // gone, or a zombie waiting for init to reap it
        for (int i = 0; i < 20 && grandchild > 0 && !grandchild_ended; ++i) {
          std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
          std::string line;
          grandchild_ended = !std::getline(stat, line) || line.substr(line.rfind(')') + 2, 1) == "Z";
          if (!grandchild_ended) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        std::fprintf(stderr, "interrupted=%d seconds=%.1f grandchild_ended=%d\n", result.interrupted, seconds,
                     grandchild_ended);
        std::exit(result.interrupted && speedlabs::stop_requested() && seconds < 10 && grandchild_ended ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "interrupted=1");
}

// The lab killed outright (SIGKILL: no handler runs) while a child runs: the child gets SIGKILL too, so
// nothing it started outlives the lab. The child itself kills the death test's process, then waits.
TEST(Process, AChildDiesWithTheLabEvenOnSigkill) {
  const auto pid_file = std::filesystem::temp_directory_path() / ("speedlabs-orphan-" + std::to_string(getpid()));
  EXPECT_EXIT(speedlabs::run_process({"sh", "-c", "echo $$ > \"$0\"; kill -9 $PPID; exec sleep 60", pid_file.string()}),
              ::testing::KilledBySignal(SIGKILL), "");
  pid_t child = 0;
  for (int i = 0; i < 50 && child == 0; ++i) {  // the file is written before the kill; read it whole
    std::ifstream(pid_file) >> child;
    if (child == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::filesystem::remove(pid_file);
  ASSERT_GT(child, 0);
  bool child_ended = false;  // gone, or a zombie waiting for init to reap it
  for (int i = 0; i < 50 && !child_ended; ++i) {
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string line;
    child_ended = !std::getline(stat, line) || line.substr(line.rfind(')') + 2, 1) == "Z";
    if (!child_ended) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!child_ended) kill(child, SIGKILL);
  EXPECT_TRUE(child_ended) << "the child " << child << " outlived the lab that started it";
}

// A lab checks its --python before any work: a missing or non-executable program is a usage error.
TEST(Process, RequireProgramFindsPathsAndPathEntries) {
  EXPECT_NO_THROW(speedlabs::require_program("sh", "--python"));
  EXPECT_NO_THROW(speedlabs::require_program("/bin/sh", "--python"));
  EXPECT_THROW(speedlabs::require_program("/nonexistent/python", "--python"), speedlabs::UsageError);
  EXPECT_THROW(speedlabs::require_program("/etc/passwd", "--python"), speedlabs::UsageError);
  EXPECT_THROW(speedlabs::require_program("/tmp", "--python"), speedlabs::UsageError);
  EXPECT_THROW(speedlabs::require_program("no-such-program-speedlabs", "--python"), speedlabs::UsageError);
}

TEST(Process, MissingProgramIsAClearError) {
  EXPECT_THROW(speedlabs::run_process({"/nonexistent/program"}), speedlabs::RuntimeFailure);
}

}  // namespace
