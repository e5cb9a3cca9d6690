// run_lab turns each outcome into the documented exit code.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "common/device.h"
#include "common/errors.h"

namespace {

const speedlabs::LabInfo kInfo{"00", "00_test", "a test lab"};

int run_with(std::vector<std::string> args, const speedlabs::RunExperiment& body, int* n = nullptr) {
  args.insert(args.begin(), "lab00");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  int local_n = 1;
  return speedlabs::run_lab(
      static_cast<int>(argv.size()), argv.data(), kInfo,
      [&](CLI::App& app) { speedlabs::add_int_flag(app, "--n", n ? *n : local_n, "size"); }, body);
}

void holds(const speedlabs::LabContext&, speedlabs::Report& r) { r.check("x", "x", 1, "1", true); }

}  // namespace

TEST(Cli, ExitCodes) {
  EXPECT_EQ(run_with({}, holds), 0);
  EXPECT_EQ(run_with({"--help"}, holds), 0);
  EXPECT_EQ(run_with({"--no-such-flag"}, holds), 2);
  EXPECT_EQ(run_with({"--device", "tpu"}, holds), 2);
  EXPECT_EQ(run_with({"--n", "0"}, holds), 2);
  EXPECT_EQ(run_with({"--n", "-5"}, holds), 2);
  EXPECT_EQ(run_with({"--n", "ten"}, holds), 2);
  EXPECT_EQ(run_with({"--json", "/nonexistent-folder/x.json"}, holds), 2);
  EXPECT_EQ(run_with({}, [](const auto&, auto& r) { r.check("x", "x", 0, "1", false); }), 1);
  EXPECT_EQ(run_with({}, [](const auto&, auto&) { throw speedlabs::RuntimeFailure("data missing"); }), 3);
  EXPECT_EQ(run_with({}, [](const auto&, auto&) { speedlabs::not_implemented("00", "00_test", "f"); }), 4);
}

TEST(Cli, GpuAskedForWithoutOneIsAUsageError) {
  if (speedlabs::cuda_available()) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_EQ(run_with({"--device", "cuda"}, holds), 2);
}

TEST(Cli, FlagsReachTheExperimentAndJsonIsWritten) {
  const auto path = (std::filesystem::temp_directory_path() / "speedlabs_cli_test.json").string();
  int n = 1;
  bool quick = false;
  const int code = run_with({"--n", "7", "--quick", "--json", path},
                            [&](const speedlabs::LabContext& c, speedlabs::Report& r) {
                              quick = c.flags.quick;
                              r.check("n", "n arrives", n, "7", n == 7);
                            },
                            &n);
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(quick);
  std::ifstream in(path);
  const auto json = nlohmann::json::parse(in);
  EXPECT_EQ(json["lab"], "00_test");
  EXPECT_EQ(json["observations"][0]["measured"], 7);
  std::filesystem::remove(path);
}
