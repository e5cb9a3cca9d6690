// Lab 06: the padded vocabulary, the optimizers' given parts (their updates, the exercise, are graded in
// graded.cpp), and the ladder's observations on the tiny model on this machine (the CUDA-graph rung is not applicable
// without a GPU).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "common/build_paths.h"
#include "common/device.h"
#include "common/errors.h"
#include "common/observations.h"
#include "labs/06_compile_ahead/src/experiment.h"
#include "labs/06_compile_ahead/src/optimizers.h"
#include "labs/06_compile_ahead/src/python_peers.h"
#include "tests/support/data.h"
#include "tests/support/timed.h"

namespace {

using speedlabs::Verdict;

TEST(Lab06PaddedVocab, RoundsUpToTheTile) {
  EXPECT_EQ(lab06::padded_vocab_size(50257, 128), 50304);
  EXPECT_EQ(lab06::padded_vocab_size(50304, 128), 50304);
  EXPECT_EQ(lab06::padded_vocab_size(1, 128), 128);
  EXPECT_EQ(lab06::padded_vocab_size(50257, 64), 50304);
  EXPECT_EQ(lab06::padded_vocab_size(7, 1), 7);
  EXPECT_THROW(lab06::padded_vocab_size(0, 128), speedlabs::UsageError);
  EXPECT_THROW(lab06::padded_vocab_size(50257, 0), speedlabs::UsageError);
}

// The optimizers' constructors (given code): both refuse an empty list and mixed devices.
template <typename Optimizer>
class Lab06MultiTensorAdamW : public ::testing::Test {};
using MultiTensorOptimizers = ::testing::Types<lab06::ForeachAdamW, lab06::FusedAdamW>;
TYPED_TEST_SUITE(Lab06MultiTensorAdamW, MultiTensorOptimizers);

TYPED_TEST(Lab06MultiTensorAdamW, RefusesNoParametersOrMixedDevices) {
  EXPECT_THROW(TypeParam({}, 0.1), speedlabs::UsageError);
  const auto on_cpu = torch::ones({2}).requires_grad_(true);
  const auto on_meta = torch::ones({2}, torch::TensorOptions().device(torch::kMeta)).requires_grad_(true);
  EXPECT_THROW(TypeParam({on_cpu, on_meta}, 0.1), speedlabs::UsageError);
}

TEST(Lab06Flops, FormulaOfTheChapter) {
  // GPT-2 small without its position embedding: 124,439,808 - 1024 * 768 parameters.
  const int64_t n = 124439808 - 1024 * 768;
  EXPECT_DOUBLE_EQ(lab06::flops_per_token(n, 12, 12, 64, 1024), 6.0 * n + 12.0 * 12 * 12 * 64 * 1024);
  EXPECT_DOUBLE_EQ(lab06::flops_per_token(10, 1, 1, 1, 1), 72.0);
}

TEST(Lab06Rungs, NamesRoundTripAndBadNamesAreUsageErrors) {
  for (auto rung : lab06::all_rungs()) EXPECT_EQ(lab06::parse_rung(lab06::to_string(rung)), rung);
  EXPECT_EQ(lab06::all_rungs().size(), 7u);
  EXPECT_THROW(lab06::parse_rung("turbo"), speedlabs::UsageError);
}

TEST(Lab06Sdpa, NamesTheCpuBackend) {
  const auto backend = lab06::sdpa_backend(c10::Device(c10::kCPU), {2, 32}, 4, 16, c10::kFloat);
  EXPECT_TRUE(backend.rfind("flash_attention", 0) == 0 || backend == "math") << backend;
}

TEST(Lab06Ladder, ShapeLongerThanTheBlockIsAUsageError) {
  auto config = lab06::quick_config();
  config.shapes = {{1, 129}};  // the tiny model's block is 128
  speedlabs::Report report("06_compile_ahead", "cpu");
  EXPECT_THROW(lab06::run(config, c10::Device(c10::kCPU), report), speedlabs::UsageError);
}

// The whole ladder once, on the tiny model, with the Python eager peers (one test: CTest runs every test
// in its own process, and the ladder is the expensive part).
TEST(Lab06LadderOnCpu, ClimbsEveryCpuRungTracksFp32AndMatchesThePythonPeer) {
  SPEEDLABS_REQUIRE_DATA();
  auto config = lab06::quick_config();
  config.python = speedlabs::configured_python();
  speedlabs::Report report("06_compile_ahead", "cpu");
  const auto result = lab06::run(config, c10::Device(c10::kCPU), report);

  // Every rung below the graph runs; the graph is not applicable without a GPU, with a reason.
  for (const char* rung : {"fp32", "tf32", "bf16", "sdpa", "vocab50304", "fused_adamw"}) {
    EXPECT_EQ(report.at(std::string("rung_") + rung + "_2x32").verdict, Verdict::holds) << rung;
  }
  const auto& graph = report.at("rung_cuda_graph_2x32");
  EXPECT_EQ(graph.verdict, Verdict::not_applicable);
  EXPECT_FALSE(graph.reason.empty());

  // The losses track fp32, and bf16 autocast really changes the arithmetic (not fp32 bit for bit).
  EXPECT_EQ(report.at("initial_losses_2x32").verdict, Verdict::holds);
  EXPECT_EQ(report.at("losses_track_fp32_2x32").verdict, Verdict::holds);
  EXPECT_GT(report.at("losses_track_fp32_2x32").measured.at("bf16").get<double>(), 0.0);
  // The tiny model starts near ln(50257) = 10.8 and every step's loss is logged.
  const auto& fp32 = result.rungs.front();
  ASSERT_EQ(fp32.name, "fp32");
  EXPECT_EQ(fp32.losses.size(), 6u);
  EXPECT_NEAR(fp32.losses.front(), std::log(50257.0), 0.3);

  // Timings and rates are measured; the CPU has no peak-memory statistics.
  EXPECT_EQ(report.at("bf16_matmul_tflops").verdict, Verdict::holds);  // correctness: untimed
  // The rates carry their evidence (repeats' or steps' spread, the machine's reading) for the table.
  EXPECT_TRUE(speedlabs::testing::timed_with_evidence(report.at("bf16_matmul_tflops")));
  EXPECT_GE(report.at("bf16_matmul_tflops").measured.at("tflops").get<double>(),
            report.at("bf16_matmul_tflops").measured.at("median_tflops").get<double>())
      << "a peak is the best repeat";
  for (const char* rung : {"fp32", "tf32", "bf16", "sdpa", "vocab50304", "fused_adamw"}) {
    const auto& o = report.at(std::string("rung_") + rung + "_2x32");
    EXPECT_TRUE(speedlabs::testing::timed_with_evidence(o)) << rung;
    EXPECT_EQ(o.evidence["value"]["count"].get<int>(), config.steps) << rung;
    EXPECT_LE(o.measured["speedup_q1"].get<double>(), o.measured["speedup_vs_fp32"].get<double>() + 1e-12) << rung;
    EXPECT_GE(o.measured["speedup_q3"].get<double>(), o.measured["speedup_vs_fp32"].get<double>() - 1e-12) << rung;
  }
  for (const auto& r : result.rungs) {
    if (!r.ran) continue;
    EXPECT_GT(r.median_ms, 0) << r.name;
    EXPECT_GT(r.tokens_per_s, 0) << r.name;
    EXPECT_GT(r.tflops, 0) << r.name;
    // Both MFUs on a CPU too: the same FLOP/s over the measured and over the theoretical peak of the rung's format.
    const auto format = lab06::rung_format(lab06::parse_rung(r.name));
    EXPECT_DOUBLE_EQ(r.mfu, r.tflops / result.peaks.measured_tflops.at(format)) << r.name;
    EXPECT_DOUBLE_EQ(r.mfu_theoretical, r.tflops / (result.peaks.theoretical.at(format).flops / 1e12)) << r.name;
    EXPECT_GT(r.mfu_theoretical, 0) << r.name;
    EXPECT_FALSE(r.peak_bytes.has_value()) << r.name;
  }
  const auto& mfu = report.at("mfu_2x32");
  EXPECT_FALSE(mfu.must_hold);
  EXPECT_EQ(mfu.measured.at("top_rung").get<std::string>(), "fused_adamw") << "the top rung a CPU runs";
  EXPECT_EQ(mfu.measured.at("rungs").at("tf32").at("format").get<std::string>(), "tf32");
  EXPECT_EQ(mfu.measured.at("rungs").at("sdpa").at("format").get<std::string>(), "bf16");
  EXPECT_TRUE(mfu.measured.at("peaks").at("fp32").contains("theoretical"));
  const auto sdpa = report.at("rung_sdpa_2x32").measured.at("detail").get<std::string>();
  EXPECT_NE(sdpa.find("attention backend"), std::string::npos) << sdpa;

  // The goals are reported but judged only on a CUDA GPU, and never fail the run.
  for (const char* id : {"goal_cpp_eager_vs_python_eager_4x128", "goal_top_rung_vs_python_eager_bf16_4x128",
                         "goal_top_rung_vs_python_compile_bf16_16x1024", "goal_top_rung_mfu_16x1024"}) {
    EXPECT_EQ(report.at(id).verdict, Verdict::not_applicable) << id;
    EXPECT_FALSE(report.at(id).must_hold) << id;
  }

  // The Python eager peers ran on the same weights and batches; the fp32 one matches the C++ fp32 rung.
  if (speedlabs::configured_python().empty()) GTEST_SKIP() << "no Python with torch configured";
  EXPECT_EQ(report.at("python_peers_2x32").verdict, Verdict::holds);
  EXPECT_EQ(report.at("python_eager_vs_cpp_fp32_2x32").verdict, Verdict::holds);
  ASSERT_EQ(result.peers.size(), 2u);  // fp32 and bf16, eager only on a CPU
  EXPECT_EQ(result.peers[0].name, "python_eager_fp32");
  EXPECT_EQ(result.peers[1].name, "python_eager_bf16");
  EXPECT_EQ(report.at("python_compile_tracks_cpp_2x32").verdict, Verdict::not_applicable);
  EXPECT_EQ(report.exit_code(), 0);
}

// The peers start from an argv vector, never a shell: a --python path with a quote in it is a file name
// that does not exist, not a command (it once ran "touch"), and no temporary file of the run is left.
TEST(Lab06LadderOnCpu, APythonPathIsNeverRunAsAShellCommand) {
  SPEEDLABS_REQUIRE_DATA();
  namespace fs = std::filesystem;
  const fs::path folder = fs::temp_directory_path() / ("speedlabs-test-lab06-" + std::to_string(getpid()));
  fs::create_directories(folder);
  const fs::path injected = folder / "INJECTED";
  auto config = lab06::quick_config();
  config.top = lab06::Rung::fp32;
  config.peer_modes = {"fp32"};
  config.python = "/bin/true'; touch '" + injected.string() + "'; '";
  speedlabs::Report report("06_compile_ahead", "cpu");
  lab06::run(config, c10::Device(c10::kCPU), report);

  EXPECT_FALSE(fs::exists(injected));
  const auto& peers = report.at("python_peers_2x32");
  EXPECT_EQ(peers.verdict, Verdict::fails);
  EXPECT_NE(peers.measured.dump().find("cannot start"), std::string::npos) << peers.measured.dump();
  for (const auto& entry : fs::directory_iterator(fs::temp_directory_path())) {
    EXPECT_EQ(entry.path().filename().string().rfind("speedlabs-lab06-" + std::to_string(getpid()), 0),
              std::string::npos)
        << "left behind: " << entry.path();
  }
  fs::remove_all(folder);
}

// The Python peers run by a stand-in for Python: a shell script given the peers' arguments ($3 is the state file),
// in a folder of its own that is also this test's temp folder (TMPDIR) while it runs.
class Lab06PythonPeers : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = std::filesystem::temp_directory_path() / ("speedlabs-test-lab06-peers-" + std::to_string(getpid()));
    std::filesystem::create_directories(folder_ / "tmp");
    const char* previous = std::getenv("TMPDIR");
    previous_tmpdir_ = previous != nullptr ? previous : "";
    setenv("TMPDIR", (folder_ / "tmp").c_str(), 1);
  }
  void TearDown() override {
    if (previous_tmpdir_.empty()) {
      unsetenv("TMPDIR");
    } else {
      setenv("TMPDIR", previous_tmpdir_.c_str(), 1);
    }
    std::filesystem::remove_all(folder_);
  }
  // Runs the peers of the tiny model at 2x32 with @p script_body as the Python; returns why they failed.
  std::string run_peers(const std::string& script_body, double timeout_s) {
    const auto python = folder_ / "python";
    std::ofstream(python) << "#!/bin/sh\n" << script_body << "\n";
    std::filesystem::permissions(python, std::filesystem::perms::owner_all);
    auto config = lab06::quick_config();
    config.python = python.string();
    config.peer_timeout_s = timeout_s;
    const auto model = speedlabs::gpt::GPTConfig::by_name(config.model);
    std::vector<int32_t> ids(1000);
    std::iota(ids.begin(), ids.end(), 0);
    for (auto& id : ids) id %= 50;
    const lab06::Shape shape{2, 32};
    const auto batches = lab06::load_batches(ids, shape, config.warmup + config.steps, c10::Device(c10::kCPU));
    std::string failure;
    const auto peers = lab06::run_python_peers(config, c10::Device(c10::kCPU), shape, model,
                                               lab06::initial_weights(model, 42), batches, failure);
    EXPECT_TRUE(peers.empty());
    return failure;
  }
  std::filesystem::path folder_;
  std::string previous_tmpdir_;
};

// A peer that never finishes is stopped at the time limit, and the failure says so.
TEST_F(Lab06PythonPeers, AHungPeerIsStoppedAtTheTimeLimit) {
  const auto start = std::chrono::steady_clock::now();
  const std::string failure = run_peers("exec sleep 600", 2);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 30);
  EXPECT_NE(failure.find("did not finish within 2 s"), std::string::npos) << failure;
  EXPECT_TRUE(std::filesystem::is_empty(folder_ / "tmp"));
}

// While the peers run, their state is readable through the path they are given and has no name in the temp
// folder, so a SIGKILLed lab (whose child common/process kills with it) leaves no file behind.
TEST_F(Lab06PythonPeers, TheStateHasNoNameWhileThePeersRun) {
  const auto seen = folder_ / "seen";
  const std::string failure = run_peers(
      "ls -A \"$TMPDIR\" > '" + seen.string() + ".files'; wc -c < \"$3\" > '" + seen.string() + ".bytes'; exit 1", 60);
  EXPECT_NE(failure.find("exit 1"), std::string::npos) << failure;
  std::ifstream files(seen.string() + ".files");
  const std::string listed((std::istreambuf_iterator<char>(files)), std::istreambuf_iterator<char>());
  EXPECT_EQ(listed, "") << "named in the temp folder while the peers ran";
  int64_t bytes = 0;
  std::ifstream(seen.string() + ".bytes") >> bytes;
  EXPECT_GT(bytes, 100000) << "the peers could not read their state";
  EXPECT_TRUE(std::filesystem::is_empty(folder_ / "tmp"));
}

// The torch.compile peer, asked for on the CPU: it compiles (tens of seconds on two cores), reports its
// first step apart from the median, and its losses track the C++ bf16 rung's.
TEST(Lab06LadderOnCpu, TorchCompilePeerRunsWhenAskedFor) {
  SPEEDLABS_REQUIRE_DATA();
  if (speedlabs::configured_python().empty()) GTEST_SKIP() << "no Python with torch configured";
  auto config = lab06::quick_config();
  config.python = speedlabs::configured_python();
  config.top = lab06::Rung::bf16;
  config.peer_modes = {"bf16"};
  config.compile_modes = {"bf16"};
  speedlabs::Report report("06_compile_ahead", "cpu");
  const auto result = lab06::run(config, c10::Device(c10::kCPU), report);

  EXPECT_EQ(report.at("python_peers_2x32").verdict, Verdict::holds);
  ASSERT_EQ(result.peers.size(), 2u);
  const auto& compiled = result.peers[1];
  EXPECT_EQ(compiled.name, "python_compile_bf16");
  EXPECT_EQ(compiled.losses.size(), 6u);
  // Compiling happens inside the first call: that step is far slower than the median afterwards.
  EXPECT_GT(compiled.first_step_ms, 2 * compiled.median_ms);
  const auto& tracks = report.at("python_compile_tracks_cpp_2x32");
  EXPECT_EQ(tracks.verdict, Verdict::holds);
  EXPECT_TRUE(tracks.measured.contains("python_compile_bf16"));
  EXPECT_EQ(report.exit_code(), 0);
}

}  // namespace
