// Lab 08 on the CPU: the formulas, every observation of the smoke run's --quick report, the budget and the plot.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "common/build_paths.h"
#include "common/errors.h"
#include "experiment.h"
#include "tests/support/smoke_run.h"
#include "tests/support/timed.h"

namespace {

const c10::Device kCpu(c10::kCPU);

const lab08::ModelShape& tiny() {
  static const lab08::ModelShape shape = lab08::model_shape("tiny");
  return shape;
}

TEST(Lab08Formulas, WeightsGradientsAndAdamWAreFourFourAndEightBytesPerParameter) {
  const auto& shape = tiny();
  // Tiny GPT: tied token embedding 50257 x 64, positions 128 x 64, 2 blocks of 12 C^2 + 13 C, ln_f 2 C.
  const int64_t C = 64;
  EXPECT_EQ(shape.params, 50257 * C + 128 * C + 2 * (12 * C * C + 13 * C) + 2 * C);
  EXPECT_EQ(shape.largest_param, 50257 * C);
  EXPECT_EQ(shape.matmul_params, shape.params - 128 * C - (2 * 4 * C + 2 * C));  // not wpe, not LayerNorms
  EXPECT_EQ(lab08::weights_bytes_formula(shape), 4 * shape.params);
  EXPECT_EQ(lab08::grads_bytes_formula(shape), 4 * shape.params);
  EXPECT_EQ(lab08::adamw_state_bytes_formula(shape), 8 * shape.params);
}

TEST(Lab08Formulas, ActivationsCountBlocksAndTheHead) {
  const auto& shape = tiny();
  const int64_t B = 2, T = 32, C = 64, H = 4, L = 2, V = 50257;
  EXPECT_EQ(lab08::activations_bytes_formula(shape, B, T, false),
            4 * (L * (16 * B * T * C + B * H * T * T) + 2 * B * T * C + B * T * V));
  EXPECT_EQ(lab08::activations_bytes_formula(shape, B, T, true), 4 * (L * B * T * C + 2 * B * T * C + B * T * V));
  // The chapter's B=4, T=128 on GPT-2: its log-probabilities alone are B x T x V x 4 = 103 MB.
  EXPECT_NEAR(4.0 * 4 * 128 * 50257 / 1e6, 102.9, 0.1);
}

TEST(Lab08Formulas, TheLargestBatchIsTheLastOneThatFits) {
  const auto& shape = tiny();
  const int64_t budget = 300LL << 20;
  for (const bool checkpoint : {false, true}) {
    const int64_t batch = lab08::largest_batch_formula(shape, 128, checkpoint, budget);
    ASSERT_GE(batch, 1);
    EXPECT_LE(lab08::step_peak_bytes_formula(shape, batch, 128, checkpoint), budget);
    EXPECT_GT(lab08::step_peak_bytes_formula(shape, batch + 1, 128, checkpoint), budget);
  }
  EXPECT_EQ(lab08::largest_batch_formula(shape, 128, true, 1 << 20), 0);  // 1 MiB: not even the weights
  // A budget of a terabyte is answered at once (the search halves, it does not count up one by one), and the
  // answer is still the largest batch that fits.
  const int64_t terabyte = int64_t{1} << 40;
  const int64_t huge = lab08::largest_batch_formula(shape, 128, false, terabyte);
  EXPECT_GT(huge, 1000);
  EXPECT_LE(lab08::step_peak_bytes_formula(shape, huge, 128, false), terabyte);
  EXPECT_GT(lab08::step_peak_bytes_formula(shape, huge + 1, 128, false), terabyte);
}

TEST(Lab08Formulas, SevenBillionParametersNeed112GBToTrainWithAdamW) {
  const auto table = lab08::training_memory_table();
  ASSERT_EQ(table.size(), 4u);
  EXPECT_DOUBLE_EQ(table[0].per_param() * 7e9 / 1e9, 112.0);  // float32 + AdamW: 16 B/param
  EXPECT_DOUBLE_EQ(table[1].per_param(), 16.0);               // autocast keeps every float32 tensor
  EXPECT_DOUBLE_EQ(table[2].per_param(), 16.0);               // the usual mixed precision: 2 + 4 + 2 + 8
  EXPECT_DOUBLE_EQ(table[3].per_param() * 7e9 / 1e9, 56.0);   // all bf16: 8 B/param
}

// On the CPU the counting allocator sees exactly the bytes each tensor asked for.
TEST(Lab08Phases, WeightsGradientsAndAdamWStateAreExactlyTheFormulas) {
  const auto phases = lab08::measure_phases("tiny", {2, 32, std::nullopt, false}, kCpu);
  EXPECT_EQ(phases.weights, lab08::weights_bytes_formula(tiny()));
  EXPECT_EQ(phases.grads(), lab08::grads_bytes_formula(tiny()));
  EXPECT_EQ(phases.adamw_state(), lab08::adamw_state_bytes_formula(tiny()));
  EXPECT_GT(phases.backward_peak, phases.after_forward);
  EXPECT_FALSE(phases.reserved.has_value());  // the CPU has no caching allocator
}

TEST(Lab08Phases, CheckpointingKeepsOneTensorPerBlock) {
  const auto plain = lab08::measure_phases("tiny", {2, 32, std::nullopt, false}, kCpu);
  const auto checkpointed = lab08::measure_phases("tiny", {2, 32, std::nullopt, true}, kCpu);
  const int64_t saved = plain.activations() - checkpointed.activations();
  const int64_t predicted =
      lab08::activations_bytes_formula(tiny(), 2, 32, false) - lab08::activations_bytes_formula(tiny(), 2, 32, true);
  // What the blocks no longer keep, within the small tensors the formula leaves out.
  EXPECT_GE(saved, predicted * 9 / 10);
  EXPECT_LE(saved, predicted * 11 / 10);
  EXPECT_EQ(plain.loss, checkpointed.loss);  // the same float32 forward
}

// The README's "What you should observe" table lists exactly the ids the lab reports.
std::set<std::string> readme_ids() {
  std::ifstream readme(speedlabs::source_dir() + "/labs/08_memory/README.md");
  std::stringstream text;
  text << readme.rdbuf();
  const std::string all = text.str();
  const auto start = all.find("## What you should observe");
  const auto end = all.find("\n## ", start + 1);
  const std::string section = all.substr(start, end - start);
  std::set<std::string> ids;
  const std::regex row(R"(\n\| `([a-z0-9_]+)` \|)");
  for (auto it = std::sregex_iterator(section.begin(), section.end(), row); it != std::sregex_iterator(); ++it) {
    ids.insert((*it)[1]);
  }
  return ids;
}

// The --quick run on the CPU: the smoke run's (ctest -R lab08.smoke runs `lab08 --quick --device cpu`, as
// lab08::run of lab08::quick_config() on the CPU), read back from its report; CTest runs it first (the fixture
// lab08_json). The phase plot it would write with --results is Lab08Plot's.
TEST(Lab08Run, FromTheSmokeRunEveryObservationHoldsOnTheCpuAndTheReadmeListsThem) {
  const speedlabs::Report report = speedlabs::testing::smoke_report("08");
  ASSERT_TRUE(speedlabs::testing::observed_on_cpu(report)) << report.device();
  std::set<std::string> reported;
  for (const auto& o : report.observations()) {
    reported.insert(o.id);
    if (o.must_hold) {
      EXPECT_EQ(o.verdict, speedlabs::Verdict::holds) << o.id << ": " << o.measured.dump();
    }
  }
  EXPECT_EQ(reported, readme_ids());
  EXPECT_EQ(report.exit_code(), 0);
  // Reported, not must-hold, yet what a CPU shows: on the tiny model autocast's bf16 weight copies
  // outweigh what the blocks save, and without them bf16 keeps fewer bytes than float32.
  const auto& bf16 = report.at("bf16_autocast_activation_bytes_vs_fp32").measured;
  EXPECT_GT(bf16["ratio"].get<double>(), 1.0);
  EXPECT_LT(bf16["ratio_without_weight_copies"].get<double>(), 1.0);
  EXPECT_FALSE(report.at("checkpointing_step_time_ratio").must_hold);
  // Plain and checkpointed steps ran in the same rounds; the ratio carries its spread and the machine's reading.
  EXPECT_TRUE(speedlabs::testing::timed_with_evidence(report.at("checkpointing_step_time_ratio")));
  EXPECT_EQ(report.at("checkpointing_loss_and_grads").measured["plain_loss"],
            report.at("checkpointing_loss_and_grads").measured["checkpointed_loss"]);
}

TEST(Lab08Run, ABudgetBelowBatchOneIsAUsageErrorBeforeAnythingRuns) {
  lab08::Config config = lab08::quick_config();
  config.budget_mb = 20;  // the tiny model's weights, gradients and AdamW state alone are 54 MiB
  config.results_dir.clear();
  speedlabs::Report report("08_memory", "cpu");
  try {
    lab08::run(config, kCpu, report);
    FAIL() << "a 20 MiB budget was accepted";
  } catch (const speedlabs::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("too small"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(report.observations().empty());
}

TEST(Lab08Run, ABatchNoMachineHoldsIsAUsageErrorBeforeAnythingRuns) {
  for (const int64_t batch : {int64_t{100'000'000}, std::numeric_limits<int64_t>::max()}) {
    lab08::Config config = lab08::quick_config();
    config.batch = batch;  // B x T x V floats of log-probabilities alone: terabytes, or past int64
    speedlabs::Report report("08_memory", "cpu");
    try {
      lab08::run(config, kCpu, report);
      FAIL() << "--batch " << batch << " was accepted";
    } catch (const speedlabs::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("is too large"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("up to B="), std::string::npos) << e.what();
    }
    EXPECT_TRUE(report.observations().empty());
  }
}

TEST(Lab08Run, ASequenceLongerThanTheModelsIsAUsageError) {
  EXPECT_THROW(lab08::measure_phases("tiny", {1, 129, std::nullopt, false}, kCpu), speedlabs::UsageError);
}

TEST(Lab08Plot, WritesTheDataTheScriptAndAnSvg) {
  const auto dir = std::filesystem::temp_directory_path() / "lab08 plot's test";  // a space and a quote: data, not code
  std::filesystem::remove_all(dir);
  lab08::PhaseBytes phases;
  phases.weights = 10 << 20;
  phases.after_forward = 30 << 20;
  phases.backward_peak = 50 << 20;
  phases.after_backward = 20 << 20;
  phases.step_peak = 45 << 20;
  phases.after_step = 40 << 20;
  const std::string said = lab08::write_phase_plot(dir.string(), {{"float32", phases}, {"bf16 autocast", phases}});
  EXPECT_TRUE(std::filesystem::exists(dir / "memory_phases.dat"));
  EXPECT_TRUE(std::filesystem::exists(dir / "memory_phases.gp"));
  if (said.find("not installed") != std::string::npos) GTEST_SKIP() << said;
  ASSERT_TRUE(std::filesystem::exists(dir / "memory_phases.svg")) << said;
  std::ifstream svg(dir / "memory_phases.svg");
  std::stringstream text;
  text << svg.rdbuf();
  EXPECT_NE(text.str().find("<svg"), std::string::npos);
  EXPECT_NE(text.str().find("bf16 autocast"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
