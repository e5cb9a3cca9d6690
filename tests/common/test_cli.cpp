// run_lab turns each outcome into the documented exit code.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <new>
#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "common/device.h"
#include "common/errors.h"
#include "common/format.h"
#include "common/process.h"
#include "common/timer.h"

namespace {

const speedlabs::LabInfo kInfo{"00", "00_test", "a test lab"};
// run_lab starts its program again as itself on a busy machine when no OpenMP wait policy is set
// (common/cli.cpp); here that program is this test binary, so one is always set (CTest sets PASSIVE too).
const bool kWaitPolicySet = setenv("OMP_WAIT_POLICY", "PASSIVE", 0) == 0;

int run_with(std::vector<std::string> args, const speedlabs::RunExperiment& body, int* n = nullptr) {
  args.insert(args.begin(), "lab00");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  int local_n = 1;
  return speedlabs::run_lab(
      static_cast<int>(argv.size()), argv.data(), kInfo,
      [&](CLI::App& app) { app.add_option("--n", n ? *n : local_n, "size")->check(speedlabs::at_least(1)); }, body);
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
  const int code = run_with(
      {"--n", "7", "--quick", "--json", path},
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

namespace {

// Parses one flag list with a real-valued --lr and a --seed; returns the exit code.
int parse_number_flags(std::vector<std::string> args, double* lr = nullptr, uint64_t* seed = nullptr) {
  args.insert(args.begin(), "lab00");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  double local_lr = 1e-3;
  uint64_t local_seed = 0;
  return speedlabs::run_lab(
      static_cast<int>(argv.size()), argv.data(), kInfo,
      [&](CLI::App& app) {
        app.add_option("--lr", lr ? *lr : local_lr, "learning rate")->check(speedlabs::finite_above());
        app.add_option("--seed", seed ? *seed : local_seed, "random seed")->check(speedlabs::whole_seed());
      },
      holds);
}

}  // namespace

TEST(Cli, RealValuedFlagsRefuseNanInfAndOutOfRange) {
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "0", "-1e-3", "abc", "1e999"}) {
    EXPECT_EQ(parse_number_flags({"--lr", bad}), 2) << "--lr " << bad;
  }
  double lr = 0;
  EXPECT_EQ(parse_number_flags({"--lr", "3e-4"}, &lr), 0);
  EXPECT_DOUBLE_EQ(lr, 3e-4);
}

TEST(Cli, SeedsAreWholeNumbersInRange) {
  for (const char* bad : {"-1", "18446744073709551615", "9223372036854775808", "1.5", "+5", "x", ""}) {
    EXPECT_EQ(parse_number_flags({"--seed", bad}), 2) << "--seed " << bad;
  }
  uint64_t seed = 0;
  EXPECT_EQ(parse_number_flags({"--seed", "9223372036854775807"}, nullptr, &seed), 0);
  EXPECT_EQ(seed, 9223372036854775807ULL);
}

namespace {

// Parses a 64-bit --rows checked by at_least(1); returns the exit code.
int parse_rows(const std::string& value, int64_t* rows) {
  std::vector<std::string> args = {"lab00", "--rows", value};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return speedlabs::run_lab(
      static_cast<int>(argv.size()), argv.data(), kInfo,
      [&](CLI::App& app) { app.add_option("--rows", *rows, "rows")->check(speedlabs::at_least(int64_t{1})); }, holds);
}

}  // namespace

TEST(Cli, AWholeNumberBeyondItsTypeIsAUsageErrorNotClamped) {
  // strtoll saturates: without the check --rows 99999999999999999999 ran as 9223372036854775807.
  for (const char* bad : {"99999999999999999999", "9223372036854775808", "-99999999999999999999", "0", "1.5", "x"}) {
    int64_t rows = 7;
    EXPECT_EQ(parse_rows(bad, &rows), 2) << "--rows " << bad;
    EXPECT_EQ(rows, 7) << "--rows " << bad;
  }
  int64_t rows = 0;
  EXPECT_EQ(parse_rows("9223372036854775807", &rows), 0);
  EXPECT_EQ(rows, 9223372036854775807LL);
  EXPECT_EQ(run_with({"--n", "99999999999999999999"}, holds), 2);
}

namespace {

// The exit status of run_with(@p body) run in a child process (a signal's handlers stay with the child).
int exit_code_in_a_child(const speedlabs::RunExperiment& body) {
  std::cout.flush();
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(20);  // a child the signal did not stop ends anyway (SIGALRM: 142), never hangs the test
    _exit(run_with({}, body));
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST(Cli, AnInterruptedRunExitsWithOneCode) {
  // A lab that stops between its steps (install_stop_handlers, stop_if_asked) and one with no step to stop
  // between, by Ctrl-C or by SIGTERM: always 130, never 3 ("could not be made") nor a signal's own status.
  const auto stops_between_steps = [](int signal_number) {
    return [signal_number](const speedlabs::LabContext&, speedlabs::Report&) {
      speedlabs::install_stop_handlers();
      raise(signal_number);
      speedlabs::stop_if_asked("at step 1");
    };
  };
  const auto runs_on = [](int signal_number) {
    return [signal_number](const speedlabs::LabContext&, speedlabs::Report&) {
      raise(signal_number);
      pause();
    };
  };
  for (const int signal_number : {SIGINT, SIGTERM}) {
    EXPECT_EQ(exit_code_in_a_child(stops_between_steps(signal_number)), speedlabs::kExitInterrupted) << signal_number;
    EXPECT_EQ(exit_code_in_a_child(runs_on(signal_number)), speedlabs::kExitInterrupted) << signal_number;
  }
  EXPECT_EQ(speedlabs::kExitInterrupted, 130);
}

TEST(Cli, JsonRefusesAFolderAndPrintsToStdoutOnDash) {
  EXPECT_EQ(run_with({"--json", std::filesystem::temp_directory_path().string()}, holds), 2);
  testing::internal::CaptureStdout();
  EXPECT_EQ(run_with({"--json", "-"}, holds), 0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("\"observations\""), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists("-"));
}

TEST(Cli, JsonNeedsAPathNotAFlagOrNothing) {
  EXPECT_EQ(run_with({"--json", ""}, holds), 2);
  EXPECT_EQ(run_with({"--json", "--quick"}, holds), 2);  // --quick is not a file name
  EXPECT_FALSE(std::filesystem::exists("--quick"));
}

TEST(Cli, JsonOntoAFullStandardOutputIsARunFailure) {
  // Standard output on /dev/full: every write fails with ENOSPC. The run must not say it delivered the JSON.
  std::fflush(stdout);
  const int saved = ::dup(STDOUT_FILENO);
  const int full = ::open("/dev/full", O_WRONLY);
  ASSERT_GE(full, 0);
  ::dup2(full, STDOUT_FILENO);
  const int code = run_with({"--json", "-"}, holds);
  std::cout.clear();
  std::clearerr(stdout);
  ::dup2(saved, STDOUT_FILENO);
  ::close(full);
  ::close(saved);
  EXPECT_EQ(code, 3);
}

// Running out of memory is a run that could not be made (exit 3), with a message a student can act on:
// host or GPU, how big the failed allocation was, and which flags make the run smaller.
TEST(Cli, OutOfMemorySaysWhereHowMuchAndWhatToChange) {
  const std::string host = speedlabs::out_of_memory_message(
      "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried to allocate "
      "10737418240 bytes.");
  EXPECT_NE(host.find("out of host memory"), std::string::npos) << host;
  EXPECT_NE(host.find("(10.0 GiB)"), std::string::npos) << host;
  EXPECT_NE(host.find("--batch"), std::string::npos) << host;

  const std::string gpu = speedlabs::out_of_memory_message(
      "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.8 GiB");
  EXPECT_NE(gpu.find("out of GPU memory"), std::string::npos) << gpu;
  EXPECT_NE(gpu.find("(2.00 GiB)"), std::string::npos) << gpu;

  EXPECT_EQ(run_with({}, [](const auto&, auto&) { throw std::bad_alloc(); }), 3);
  EXPECT_EQ(run_with({},
                     [](const auto&, auto&) {
                       TORCH_CHECK_WITH(OutOfMemoryError, false,
                                        "DefaultCPUAllocator: not enough memory: you tried to allocate 64 bytes.");
                     }),
            3);
}

// libtorch's CPU allocator reports a failed allocation as a plain c10::Error: it is out of memory all the
// same (exit 3, the friendly message), not a raw "libtorch error: [enforce fail at alloc_cpu.cpp]".
TEST(Cli, AHostAllocationFailureIsOutOfMemory) {
  EXPECT_TRUE(speedlabs::is_host_allocation_failure(
      "[enforce fail at alloc_cpu.cpp:117] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
      "allocate 51463168000 bytes. Error code 12 (Cannot allocate memory)"));
  EXPECT_FALSE(speedlabs::is_host_allocation_failure("Expected all tensors to be on the same device"));
  ::testing::internal::CaptureStderr();
  // 1 PiB: more than any x86-64 or arm64 address space holds, so the allocation fails at once everywhere.
  const int code = run_with({}, [](const auto&, auto&) { torch::empty({int64_t{1} << 50}, torch::kByte); });
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 3);
  EXPECT_NE(said.find("out of host memory"), std::string::npos) << said;
  EXPECT_NE(said.find("(1024.0 TiB)"), std::string::npos) << said;
}

TEST(Cli, FormatBytesUsesBinaryUnits) {
  EXPECT_EQ(speedlabs::format_bytes(512), "512 bytes");
  EXPECT_EQ(speedlabs::format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(speedlabs::format_bytes(3.0 * (1 << 30)), "3.0 GiB");
}

namespace {

// A lab's knobs for the --quick convention's tests.
struct ToyConfig {
  int steps = 100;
  int64_t seq = 128;
  double lr = 1e-3;
  std::string model = "gpt2";
  std::vector<int> sizes{1, 2};
  speedlabs::TimingOptions timing{3, 20};
  speedlabs::TimingOptions probe{1, 2};
  std::string plots_dir;
};

// The toy lab's table: each knob once, with its quick value; --size is translated, on a "GPU" seq doubles.
speedlabs::Knobs<ToyConfig> toy_knobs() {
  speedlabs::Knobs<ToyConfig> knobs;
  knobs.flag("--steps", "steps", &ToyConfig::steps).quick(5).check(speedlabs::at_least(1));
  knobs.flag("--seq", "T", &ToyConfig::seq).quick(32).check(speedlabs::at_least(int64_t{1}));
  knobs.flag("--lr", "learning rate", &ToyConfig::lr).check(speedlabs::finite_above());
  knobs.model_flag(&ToyConfig::model).quick("tiny");
  knobs.flag<int>(
      "--size", "one size", [](const ToyConfig& c) { return c.sizes.front(); },
      [](ToyConfig& c, int size) { c.sizes = {size}; });
  knobs.setting([](auto& c) -> auto& { return c.timing.warmup; }).quick(1);
  knobs.setting(&ToyConfig::probe).quick({0, 4});
  knobs.flag("--plots", "write the plots here", &ToyConfig::plots_dir);
  knobs.adapt(
      "on a GPU", [](const c10::Device& device) { return device.is_cuda(); }, [](ToyConfig& c, bool) { c.seq *= 2; });
  return knobs;
}

// Runs a toy lab with the common flag convention; returns the configuration its experiment received.
ToyConfig run_toy(std::vector<std::string> args, int* exit_code = nullptr) {
  args.insert(args.begin(), "lab00");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  speedlabs::Knobs<ToyConfig> knobs = toy_knobs();
  ToyConfig ran;
  const int code = speedlabs::run_lab(
      static_cast<int>(argv.size()), argv.data(), kInfo, [&](CLI::App& app) { knobs.add_flags(app); },
      [&](const speedlabs::LabContext& context, speedlabs::Report& report) {
        ran = knobs.configure(context);
        holds(context, report);
      });
  if (exit_code) *exit_code = code;
  return ran;
}

// The help of the toy lab's flags, as --help prints it.
std::string toy_help() {
  speedlabs::Knobs<ToyConfig> knobs = toy_knobs();
  CLI::App app{"toy"};
  knobs.add_flags(app);
  return app.help();
}

}  // namespace

TEST(CliQuickConvention, WithoutFlagsTheFullOrTheQuickDefaultsRun) {
  const ToyConfig full = run_toy({});
  EXPECT_EQ(full.steps, 100);
  EXPECT_EQ(full.seq, 128);
  EXPECT_EQ(full.model, "gpt2");
  const ToyConfig quick = run_toy({"--quick"});
  EXPECT_EQ(quick.steps, 5);
  EXPECT_EQ(quick.seq, 32);
  EXPECT_EQ(quick.model, "tiny");
  EXPECT_EQ(quick.sizes, (std::vector<int>{1, 2})) << "a flag not given changes nothing";
}

TEST(CliQuickConvention, AnExplicitFlagWinsOverQuickInEitherOrder) {
  for (const auto& args : {std::vector<std::string>{"--quick", "--steps", "7", "--size", "9"},
                           std::vector<std::string>{"--steps", "7", "--size", "9", "--quick"}}) {
    const ToyConfig ran = run_toy(args);
    EXPECT_EQ(ran.steps, 7) << "the explicit --steps";
    EXPECT_EQ(ran.sizes, std::vector<int>{9}) << "the explicit --size, translated";
    EXPECT_EQ(ran.seq, 32) << "--quick still sets what was not given";
  }
  const ToyConfig full = run_toy({"--config", "tiny", "--lr", "0.5"});
  EXPECT_EQ(full.model, "tiny");
  EXPECT_DOUBLE_EQ(full.lr, 0.5);
  EXPECT_EQ(full.steps, 100);
}

TEST(CliQuickConvention, BadValuesAreUsageErrors) {
  for (const auto& args : {std::vector<std::string>{"--steps", "0"}, std::vector<std::string>{"--seq", "-1"},
                           std::vector<std::string>{"--lr", "nan"}, std::vector<std::string>{"--config", "huge"}}) {
    int code = -1;
    run_toy(args, &code);
    EXPECT_EQ(code, 2) << args[0] << " " << args[1];
  }
}

TEST(CliQuickConvention, QuickSettingsWithoutAFlagApplyToo) {
  EXPECT_EQ(run_toy({}).timing.warmup, 3);
  EXPECT_EQ(run_toy({"--quick"}).timing.warmup, 1);
  EXPECT_EQ(run_toy({"--quick"}).timing.repeats, 20) << "a field the quick value does not name keeps its default";
  EXPECT_EQ(toy_knobs().quick().timing.warmup, 1) << "quick() is what --quick starts from";
  EXPECT_EQ(run_toy({"--quick"}).probe.repeats, 4) << "a whole timing, set as one";
}

TEST(CliQuickConvention, HelpShowsTheDefaultAndTheQuickValueOfEachFlag) {
  const std::string help = toy_help();
  EXPECT_NE(help.find("steps (default 100; --quick: 5)"), std::string::npos) << help;
  EXPECT_NE(help.find("model size: tiny (CPU-friendly) or gpt2 (124M) (default gpt2; --quick: tiny)"),
            std::string::npos)
      << help;
  EXPECT_NE(help.find("learning rate (default 0.001; --quick: 0.001)"), std::string::npos) << help;
  EXPECT_NE(help.find("one size (default 1; --quick: 1)"), std::string::npos) << "a translated flag, as its text";
  EXPECT_NE(help.find("T (default 128; on a GPU: 256; --quick: 32; --quick on a GPU: 64)"), std::string::npos)
      << "a device adaptation's values, where they differ: " << help;
  EXPECT_NE(help.find("write the plots here\n"), std::string::npos) << "no values for a path empty in every run";
}

TEST(CliQuickConvention, ADeviceAdaptationChangesTheStartNotAGivenFlag) {
  const speedlabs::Knobs<ToyConfig> knobs = toy_knobs();
  EXPECT_EQ(knobs.start(false, c10::Device(c10::kCUDA)).seq, 256);
  EXPECT_EQ(knobs.start(true, c10::Device(c10::kCUDA)).seq, 64);
  EXPECT_EQ(knobs.start(true, c10::Device(c10::kCPU)).seq, 32);
}
