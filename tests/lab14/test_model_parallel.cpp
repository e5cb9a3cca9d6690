// Lab 14: the observations of a quick run (a one-worker reference, 2 tensor-parallel workers, 2 pipeline stages,
// through the same experiment the program runs), the checks made before any worker starts, the formulas, and an
// interrupted run that leaves no worker behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/types.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/build_paths.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/observations.h"
#include "common/process.h"
#include "datasets/data_files.h"
#include "experiment.h"
#include "pipeline.h"
#include "tests/support/data.h"
#include "tests/support/mpi_jobs.h"
#include "tests/support/spawn.h"
#include "tests/support/timed.h"

namespace {

using speedlabs::Verdict;
using speedlabs::testing::contains;

lab14::Config quick() {
  return speedlabs::testing::mpi_test_config(lab14::quick_config(), speedlabs::program_path("lab14"));
}

// One run for every observation: three jobs, a reference, tensor parallel and the pipeline.
TEST(Lab14, QuickRunReportsEveryObservation) {
  SPEEDLABS_REQUIRE_DATA();
  lab14::Config config = quick();
  config.plots_dir = (std::filesystem::temp_directory_path() / ("lab14_plots_" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(config.plots_dir);
  speedlabs::Report report("14_model_parallel", "cpu");
  lab14::run(config, report);
  std::vector<std::string> ids;
  for (const auto& o : report.observations()) ids.push_back(o.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"tp_same_losses_as_one_worker", "tp_weights_per_worker",
                                           "tp_bytes_sent_per_step", "pp_same_losses_as_one_worker", "pp_bubble_share",
                                           "pp_activation_peak_per_schedule"}))
      << "the README's list names exactly these";
  for (const char* id : {"tp_same_losses_as_one_worker", "tp_weights_per_worker", "tp_bytes_sent_per_step",
                         "pp_same_losses_as_one_worker", "pp_activation_peak_per_schedule"}) {
    EXPECT_TRUE(report.at(id).must_hold) << id;
    EXPECT_EQ(report.at(id).verdict, Verdict::holds) << id << ": " << report.at(id).measured.dump();
  }
  const auto& weights = report.at("tp_weights_per_worker").measured;
  EXPECT_DOUBLE_EQ(weights["share"].get<double>(), 0.5) << "2 workers: half of the split matrices each";
  const auto& sent = report.at("tp_bytes_sent_per_step").measured;
  // 2 workers: each all-reduce sends (N-1)/N x 2 = 1 x the activation's bytes; 4 per block.
  EXPECT_DOUBLE_EQ(sent["bytes"].get<double>(), 4.0 * config.n_layer * sent["activation_bytes"].get<double>());
  const auto& held = report.at("pp_activation_peak_per_schedule").measured;
  EXPECT_EQ(held["gpipe_M8"].get<int>(), 8);
  EXPECT_EQ(held["1f1b_M8"].get<int>(), 2);
  EXPECT_LT(held["1f1b_M8_bytes"].get<double>(), held["gpipe_M8_bytes"].get<double>())
      << "1F1B's activations take fewer bytes than GPipe's at M = 8 > N";
  // The bubble: a value per M and schedule in [0, 1], decided through the verdict layer.
  const auto& bubble = report.at("pp_bubble_share");
  EXPECT_TRUE(speedlabs::testing::timed_with_evidence(bubble));
  for (const char* key : {"gpipe_M1", "gpipe_M2", "gpipe_M4", "gpipe_M8", "1f1b_M1", "1f1b_M8"}) {
    ASSERT_TRUE(bubble.measured.contains(key)) << key;
    EXPECT_GE(bubble.measured[key].get<double>(), 0.0) << key;
    EXPECT_LE(bubble.measured[key].get<double>(), 1.0) << key;
  }
  EXPECT_GT(bubble.measured["gpipe_M1"].get<double>(), bubble.measured["gpipe_M8"].get<double>())
      << "more micro-batches, a smaller bubble: " << bubble.measured.dump();
  for (const char* schedule : {"gpipe", "1f1b"}) {
    const auto svg = std::filesystem::path(config.plots_dir) / ("lab14_timeline_" + std::string(schedule) + ".svg");
    ASSERT_TRUE(std::filesystem::exists(svg)) << svg;
    EXPECT_TRUE(contains(speedlabs::read_file(svg.string()), "<svg")) << svg;
  }
  std::filesystem::remove_all(config.plots_dir);
}

TEST(Lab14Validate, RejectsWhatCannotRunBeforeAnyWorkerStarts) {
  const auto rejects = [](auto change) {
    lab14::Config config;
    change(config);
    EXPECT_THROW(lab14::validate(config), speedlabs::UsageError);
  };
  rejects([](lab14::Config& c) { c.tp = 3; });  // 4 heads
  rejects([](lab14::Config& c) { c.pp = 3; });  // 4 blocks
  rejects([](lab14::Config& c) { c.micro_batches = 0; });
  rejects([](lab14::Config& c) { c.micro_batches = 3; });  // batch 8
  rejects([](lab14::Config& c) { c.steps = 1; });
  rejects([](lab14::Config& c) {
    c.tp = 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    c.n_head = c.tp;
  });
  EXPECT_NO_THROW(lab14::validate(lab14::Config{}));
}

TEST(Lab14Formulas, BytesAndBubbleAreTheLessonsFormulas) {
  lab14::Config config;
  config.tp = 4;
  config.batch = 2;
  config.seq = 3;
  config.n_embd = 8;
  config.n_layer = 5;
  EXPECT_DOUBLE_EQ(lab14::tp_bytes_formula(config), 5 * 4 * 2 * 0.75 * (4 * 2 * 3 * 8));
  EXPECT_DOUBLE_EQ(lab14::bubble_formula(2, 4), 0.2);
  EXPECT_DOUBLE_EQ(lab14::bubble_formula(4, 1), 0.75);
  config.batch = 8;
  config.micro_batches = 4;
  EXPECT_EQ(lab14::micro_batches_of(config), (std::vector<int>{1, 2, 4, 8}));
  config.batch = 12;
  config.micro_batches = 3;
  EXPECT_EQ(lab14::micro_batches_of(config), (std::vector<int>{1, 2, 4, 3}));
  EXPECT_EQ(lab14::gpipe_schedule(2).size(), 4u);
}

// The worker processes whose command line names @p marker (the test's own data folder).
std::vector<pid_t> workers_naming(const std::string& marker) {
  std::vector<pid_t> found;
  for (const pid_t pid : speedlabs::all_processes()) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
    const std::string cmdline{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (contains(cmdline, "--worker") && contains(cmdline, marker)) found.push_back(pid);
  }
  return found;
}

// SIGTERM to the launcher while its workers train: it ends, and no worker outlives it.
TEST(Lab14Interrupt, AStoppedRunLeavesNoWorkerBehind) {
  SPEEDLABS_REQUIRE_DATA();
  const auto folder = std::filesystem::temp_directory_path() / ("lab14_interrupt_" + std::to_string(getpid()));
  std::filesystem::create_directories(folder / "tinyshakespeare");
  const auto text = datasets::require_file(datasets::resolve_data_dir(), datasets::kShakespearePath);
  std::filesystem::remove(folder / datasets::kShakespearePath);
  std::filesystem::create_symlink(text, folder / datasets::kShakespearePath);
  const std::string log = (folder / "run.log").string();
  const pid_t pid = speedlabs::testing::spawn_logged(
      {speedlabs::program_path("lab14"), "--quick", "--steps", "100000", "--data-dir", folder.string()}, log);
  ASSERT_GT(pid, 0);
  for (int waited = 0; waited < 600 && workers_naming(folder.string()).empty(); ++waited) usleep(100'000);
  ASSERT_FALSE(workers_naming(folder.string()).empty())
      << "no worker started in a minute: " << speedlabs::read_file(log);
  usleep(500'000);
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << speedlabs::read_file(log);
  EXPECT_TRUE(workers_naming(folder.string()).empty()) << "a worker outlived the launcher";
  std::filesystem::remove_all(folder);
}

}  // namespace
