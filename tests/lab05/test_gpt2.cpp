// Lab 05: the GPT-2 model of common/gpt and the observations of a short tiny-model run through the same
// experiment the program runs. The exercise is graded in graded.cpp, the parity with Python in test_parity.cpp.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "common/build_paths.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/gpt.h"
#include "common/peaks.h"
#include "common/precision.h"
#include "common/process.h"
#include "datasets/data_files.h"
#include "labs/05_gpt2/src/experiment.h"
#include "labs/05_gpt2/src/training.h"
#include "tests/support/data.h"
#include "tests/support/expect.h"
#include "tests/support/spawn.h"
#include "tests/support/timed.h"

namespace {

namespace gpt = speedlabs::gpt;
using speedlabs::Precision;

std::string temp_path(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / ("lab05_" + name)).string();
}

TEST(Lab05Model, Gpt2HasThe124MParametersOfTheChapter) {
  torch::manual_seed(0);
  gpt::GPT model(gpt::GPTConfig::gpt2());
  // nanoGPT's count with the lm_head tied to wte: 124,439,808 (wpe's 786,432 included).
  EXPECT_EQ(gpt::parameter_count(model), 124'439'808);
}

TEST(Lab05Model, NamesShapesAndTiedHead) {
  torch::manual_seed(0);
  const auto config = gpt::GPTConfig::tiny();
  gpt::GPT model(config);
  const auto params = model->named_parameters();
  EXPECT_TRUE(params.contains("transformer.wte.weight"));
  EXPECT_TRUE(params.contains("transformer.h.1.attn.c_attn.weight"));
  EXPECT_TRUE(params.contains("transformer.ln_f.bias"));
  EXPECT_FALSE(params.contains("lm_head.weight"));  // tied: the head is the token embedding itself
  EXPECT_EQ(model->lm_head_weight().data_ptr(), model->wte->weight.data_ptr());

  const auto x = torch::randint(config.vocab_size, {2, 16}, torch::kLong);
  const auto out = model->forward(x, x);
  EXPECT_EQ(out.logits.sizes(), (std::vector<int64_t>{2, 16, config.vocab_size}));
  EXPECT_EQ(out.loss.dim(), 0);
  EXPECT_THROW(model->forward(torch::zeros({1, config.block_size + 1}, torch::kLong)), speedlabs::UsageError);
}

TEST(Lab05Model, InitialisationFollowsTheChapter) {
  torch::manual_seed(0);
  const auto config = gpt::GPTConfig::gpt2();
  gpt::GPT model(config);
  const auto params = model->named_parameters();
  // Sample standard deviations of >= 590k draws are within 1% of the true value (SE ~ 0.1%).
  EXPECT_NEAR(params["transformer.wte.weight"].std().item<double>(), 0.02, 0.0002);
  EXPECT_NEAR(params["transformer.h.0.mlp.c_fc.weight"].std().item<double>(), 0.02, 0.0002);
  const double residual = 0.02 / std::sqrt(2.0 * config.n_layer);
  EXPECT_NEAR(params["transformer.h.0.attn.c_proj.weight"].std().item<double>(), residual, 0.01 * residual);
  EXPECT_NEAR(params["transformer.h.11.mlp.c_proj.weight"].std().item<double>(), residual, 0.01 * residual);
  EXPECT_EQ(params["transformer.h.0.attn.c_attn.bias"].abs().max().item<double>(), 0.0);
  EXPECT_EQ(params["transformer.h.0.ln_1.weight"].min().item<double>(), 1.0);
}

TEST(Lab05Model, TensorFileRoundTripsAndRejectsGarbage) {
  const std::string path = temp_path("roundtrip.bin");
  const gpt::NamedTensors written{{"a", torch::randn({3, 4})},
                                  {"scalar", torch::tensor(2.5f)},
                                  {"ids", torch::arange(6, torch::kLong).view({2, 3})}};
  gpt::write_tensor_file(path, written);
  const auto read = gpt::read_tensor_file(path);
  ASSERT_EQ(read.size(), written.size());
  for (size_t i = 0; i < read.size(); ++i) {
    EXPECT_EQ(read[i].first, written[i].first);
    EXPECT_TRUE(speedlabs::testing::tensors_close(read[i].second, written[i].second, 0, 0, read[i].first));
  }
  EXPECT_THROW(gpt::write_tensor_file(path, {{"half", torch::zeros({2}, torch::kHalf)}}), speedlabs::UsageError);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "not a tensor file";
  EXPECT_THROW(gpt::read_tensor_file(path), speedlabs::RuntimeFailure);
}

TEST(Lab05Observations, QuickRunHoldsItsClaims) {
  SPEEDLABS_REQUIRE_DATA();
  auto config = lab05::quick_config();
  // fp16 autocast is the slow mode on a CPU (few CPUs have float16 matmul units); it has its own test.
  config.modes = {Precision::fp32, Precision::tf32, Precision::bf16};
  config.csv_path = temp_path("steps.csv");
  speedlabs::Report report("05_gpt2", "cpu");
  const auto results = lab05::run(config, c10::Device(c10::kCPU), report);
  for (const char* id : {"tokens_loaded", "batches_per_epoch", "loss_at_step_0", "loss_decreases", "modes_vs_fp32",
                         "master_weights_dtype"}) {
    SCOPED_TRACE(id);
    EXPECT_EQ(report.at(id).verdict, speedlabs::Verdict::holds);
  }
  // The rates are timed: reported with their steps' spread and the machine's reading (a busy machine or
  // scattered steps: 'could not decide', with the reason).
  for (const char* id : {"tokens_per_s_fp32", "tokens_per_s_tf32", "tokens_per_s_bf16"}) {
    SCOPED_TRACE(id);
    const auto& o = report.at(id);
    EXPECT_TRUE(speedlabs::testing::timed_with_evidence(o));
    EXPECT_NE(o.verdict, speedlabs::Verdict::fails);
    EXPECT_FALSE(o.must_hold);
    EXPECT_GT(o.measured.get<double>(), 0.0);
    EXPECT_EQ(o.evidence["value"]["count"].get<int>(), config.steps - lab05::warmup_steps(config.steps));
    EXPECT_NEAR(o.evidence["value"]["median"].get<double>(), o.measured.get<double>(), 1e-6 * o.measured.get<double>());
  }
  // TF32 is probed only on a GPU with tensor cores; on the CPU the row says why it is not applicable.
  const auto& tf32_layout = report.at("tf32_keeps_10_fraction_bits");
  EXPECT_EQ(tf32_layout.verdict, speedlabs::Verdict::not_applicable);
  EXPECT_NE(tf32_layout.reason.find("tensor cores"), std::string::npos) << tf32_layout.reason;
  // The first step against each timed one: one ratio per timed step, in fp32, a reported timing.
  const auto& first = report.at("first_step_slower_than_median");
  EXPECT_TRUE(speedlabs::testing::timed_with_evidence(first));
  EXPECT_FALSE(first.must_hold);
  EXPECT_EQ(first.measured["mode"], "fp32");
  EXPECT_GT(first.measured["first_ms"].get<double>(), 0.0);
  EXPECT_EQ(first.evidence["value"]["count"].get<int>(), config.steps - lab05::warmup_steps(config.steps));
  EXPECT_EQ(report.at("tokens_loaded").measured.get<int64_t>(), 338025);
  EXPECT_EQ(report.at("batches_per_epoch").measured.get<int64_t>(), 338024 / (config.batch * config.seq));
  // TF32 is a GPU tensor-core mode: on the CPU both tf32 claims are not applicable, with the reason.
  EXPECT_EQ(report.at("tf32_faster_than_fp32").verdict, speedlabs::Verdict::not_applicable);
  EXPECT_EQ(report.at("tf32_differs_slightly_from_fp32").verdict, speedlabs::Verdict::not_applicable);
  EXPECT_FALSE(report.at("tf32_differs_slightly_from_fp32").reason.empty());
  EXPECT_EQ(report.exit_code(), 0);
  // Both MFUs of every mode on the CPU too: the same FLOPs over its median step, over each peak of its format.
  const auto& mfu = report.at("mfu");
  EXPECT_FALSE(mfu.must_hold);
  const double flops = mfu.measured.at("model_flops_per_step").get<double>();
  EXPECT_DOUBLE_EQ(flops,
                   speedlabs::gpt_model_flops_per_step(speedlabs::gpt::GPTConfig::tiny(), config.batch, config.seq));
  for (const char* mode : {"fp32", "tf32", "bf16"}) {
    SCOPED_TRACE(mode);
    const auto& m = mfu.measured.at("modes").at(mode);
    EXPECT_EQ(m.at("format").get<std::string>(), mode);
    const double per_s = flops / (m.at("step_ms").get<double>() / 1e3);
    EXPECT_NEAR(m.at("mfu_measured_peak").get<double>(), per_s / m.at("measured_peak_flops").get<double>(), 1e-12);
    EXPECT_NEAR(m.at("mfu_theoretical_peak").get<double>(), per_s / m.at("theoretical_peak_flops").get<double>(),
                1e-12);
    EXPECT_GT(m.at("mfu_theoretical_peak").get<double>(), 0);
  }

  // Every mode starts from the same weights and batch: the step-0 losses agree to rounding. On the CPU
  // tf32 changes nothing, so it equals fp32 exactly; bf16 rounds to 8 bits: within 1% of the loss.
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].steps.front().loss, results[1].steps.front().loss);
  EXPECT_NEAR(results[2].steps.front().loss, results[0].steps.front().loss, 0.01 * results[0].steps.front().loss);
  // The CSV has a header and one line per step per mode, the modes side by side: step 0 of every mode in
  // the order given, step 1 in the reverse order, and so on (round-robin, so their step times pair up).
  std::ifstream csv(config.csv_path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(csv, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 1 + results.size() * static_cast<size_t>(config.steps));
  const std::vector<std::string> first_rounds{"fp32,0,", "tf32,0,", "bf16,0,", "bf16,1,", "tf32,1,", "fp32,1,"};
  for (size_t i = 0; i < first_rounds.size(); ++i) {
    EXPECT_EQ(lines[1 + i].rfind(first_rounds[i], 0), 0u) << "line " << i + 2 << ": " << lines[1 + i];
  }
}

// On a GPU, tf32_faster_than_fp32 is decided on per-step pairs: fp32's step s over tf32's step s, one
// ratio per timed step (the modes train round-robin).
TEST(Lab05Observations, Tf32SpeedupIsDecidedOnPairedSteps) {
  SPEEDLABS_REQUIRE_DATA();
  if (!torch::cuda::is_available()) GTEST_SKIP() << "TF32 is a CUDA tensor-core mode; no CUDA GPU here";
  auto config = lab05::quick_config();
  config.modes = {Precision::fp32, Precision::tf32};
  speedlabs::Report report("05_gpt2", "cuda");
  const auto results = lab05::run(config, c10::Device(c10::kCUDA), report);
  const auto& o = report.at("tf32_faster_than_fp32");
  EXPECT_TRUE(speedlabs::testing::timed_with_evidence(o));
  EXPECT_FALSE(o.must_hold);  // the tiny model: reported
  EXPECT_EQ(o.evidence["value"]["count"].get<int>(), config.steps - lab05::warmup_steps(config.steps));
  EXPECT_DOUBLE_EQ(o.measured.get<double>(), o.evidence["value"]["median"].get<double>());
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) {
    ASSERT_TRUE(r.peak_bytes.has_value());  // each mode's own peak, the other mode's tensors left out
    EXPECT_GT(*r.peak_bytes, 0);
  }
}

TEST(Lab05Observations, ChaptersBatchShapeGives660BatchesAndLnVocabLoss) {
  SPEEDLABS_REQUIRE_DATA();
  auto config = lab05::quick_config();
  config.seq = 128;
  config.steps = 1;
  config.modes = {Precision::fp32};
  speedlabs::Report report("05_gpt2", "cpu");
  lab05::run(config, c10::Device(c10::kCPU), report);
  EXPECT_EQ(report.at("batches_per_epoch").measured.get<int64_t>(), 660);
  EXPECT_EQ(report.at("batches_per_epoch").verdict, speedlabs::Verdict::holds);
  EXPECT_EQ(report.at("loss_at_step_0").verdict, speedlabs::Verdict::holds);
  EXPECT_EQ(report.at("modes_vs_fp32").verdict, speedlabs::Verdict::not_applicable);  // one mode only
}

TEST(Lab05Observations, Fp16RunsWithTheScalerOrSaysWhyNot) {
  SPEEDLABS_REQUIRE_DATA();
  auto config = lab05::quick_config();
  config.steps = 3;
  config.modes = {Precision::fp32, Precision::fp16};
  speedlabs::Report report("05_gpt2", "cpu");
  const auto results = lab05::run(config, c10::Device(c10::kCPU), report);
  const auto& fp16 = report.at("tokens_per_s_fp16");
  if (fp16.verdict == speedlabs::Verdict::not_applicable) {
    EXPECT_FALSE(fp16.reason.empty());  // this libtorch has no float16 autocast on the CPU, and says so
    return;
  }
  EXPECT_TRUE(speedlabs::testing::timed_with_evidence(fp16));
  EXPECT_NE(fp16.verdict, speedlabs::Verdict::fails);  // 2 timed steps: too few to decide, and it says so
  EXPECT_EQ(report.at("master_weights_dtype").verdict, speedlabs::Verdict::holds);
  EXPECT_EQ(report.at("modes_vs_fp32").verdict, speedlabs::Verdict::holds);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].nonfinite_fp16_steps, 0);  // the tiny model's losses are far from float16's limit
  EXPECT_GT(results[1].final_loss_scale, 1.0);    // the GradScaler was in use
}

// A run of @p mode whose first update makes every weight non-finite (an infinite learning rate); returns
// the message it stopped with ("" when it did not stop).
std::string diverging_run_message(Precision mode, int steps, int64_t batch, int64_t seq) {
  auto config = lab05::quick_config();
  config.modes = {mode};
  config.steps = steps;
  config.batch = batch;
  config.seq = seq;
  config.lr = std::numeric_limits<double>::infinity();
  speedlabs::Report report("05_gpt2", "cpu");
  try {
    lab05::run(config, c10::Device(c10::kCPU), report);
  } catch (const speedlabs::RuntimeFailure& e) {
    return e.what();
  }
  return "";
}

TEST(Lab05Observations, NonFiniteLossStopsNamingTheStep) {
  SPEEDLABS_REQUIRE_DATA();
  const std::string message = diverging_run_message(Precision::fp32, 5, 4, 32);
  EXPECT_NE(message.find("at step 1 in fp32"), std::string::npos) << "expected a RuntimeFailure, got: " << message;
}

// The GradScaler skips an fp16 step whose loss overflows, but a loss that stays NaN is a run that cannot
// recover: it stops as a failure to run (exit 3), not as a verdict that just counts skipped steps.
TEST(Lab05Observations, Fp16LossThatStaysNonFiniteStopsTheRun) {
  SPEEDLABS_REQUIRE_DATA();
  // 20 steps: room for the scaler to skip a few overflowing steps before the first update. B=1, T=8:
  // fp16 autocast is slow on a CPU, the smallest batch keeps this test to seconds.
  const std::string message = diverging_run_message(Precision::fp16, 20, 1, 8);
  if (message.find("no precision mode can run") != std::string::npos) {
    GTEST_SKIP() << "this libtorch has no float16 autocast on the CPU: " << message;
  }
  EXPECT_NE(message.find("at 8 steps in a row"), std::string::npos)
      << "expected a RuntimeFailure after 8 non-finite fp16 losses in a row, got: " << message;
}

// gnuplot gets its script on stdin from an argv vector, and a folder name is data inside the script:
// a quote in it once ended gnuplot's string early and the plots failed with a wrong "install gnuplot".
TEST(Lab05Plots, AFolderWithAQuoteInItsNameGetsBothPlots) {
  namespace fs = std::filesystem;
  try {
    speedlabs::run_process({"gnuplot", "--version"});
  } catch (const speedlabs::RuntimeFailure&) {
    GTEST_SKIP() << "gnuplot is not installed";
  }
  const fs::path folder = fs::temp_directory_path() / ("speedlabs-lab05 it's-" + std::to_string(getpid()));
  lab05::ModeResult fp32;
  fp32.mode = Precision::fp32;
  fp32.steps = {{0, 10.8, 5.0, 100.0}, {1, 9.5, 5.0, 100.0}};
  fp32.tokens_per_s = 100.0;
  ASSERT_TRUE(lab05::write_plots({fp32}, folder.string(), "a test"));
  EXPECT_GT(fs::file_size(folder / "lab05_loss.svg"), 0u);
  EXPECT_GT(fs::file_size(folder / "lab05_tokens_per_s.svg"), 0u);
  fs::remove_all(folder);
}

constexpr const char* kCsvHeader = "mode,step,loss,ms,tokens_per_s";

// Files in the test folder whose names start with @p prefix (the CSV and any temporary file beside it).
std::vector<std::string> files_starting_with(const std::string& prefix) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(::testing::TempDir())) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) names.push_back(name);
  }
  return names;
}

// Runs @p body with writes limited to @p bytes per file (as a full disk would stop them): a failed write,
// not a process killed by SIGXFSZ.
template <class Body>
void with_file_size_limit(rlim_t bytes, Body body) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit limited = saved;
  limited.rlim_cur = bytes;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limited), 0);
  body();
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previous_handler);
}

// A second run given a path that a run is writing is refused at once (exit 2), before it replaces
// anything: two runs never both say "every step written" of one file. Once the first ends, the path is free.
TEST(Lab05Csv, ASecondRunOnAPathInUseIsRefused) {
  const std::string path = temp_path("shared.csv");
  {
    speedlabs::CsvLog first(path, kCsvHeader);
    first.add("fp32,0,10.9,1,1");
    try {
      speedlabs::CsvLog second(path, kCsvHeader);
      ADD_FAILURE() << "a second run took a path another run is writing";
    } catch (const speedlabs::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("another run is writing"), std::string::npos) << e.what();
    }
    first.add("fp32,1,10.5,1,1");
    EXPECT_EQ(speedlabs::read_file(path), std::string(kCsvHeader) + "\nfp32,0,10.9,1,1\nfp32,1,10.5,1,1\n");
    EXPECT_EQ(files_starting_with("lab05_shared.csv"), std::vector<std::string>{"lab05_shared.csv"});
  }
  speedlabs::CsvLog third(path, kCsvHeader);
  third.add("bf16,0,10.8,1,1");
  EXPECT_EQ(speedlabs::read_file(path), std::string(kCsvHeader) + "\nbf16,0,10.8,1,1\n");
  std::filesystem::remove(path);
}

// A write that fails (here: a file-size limit, as a full disk would) stops the run with RuntimeFailure
// (exit 3), and the file keeps the steps written before it, as the message says.
TEST(Lab05Csv, AFailedWriteStopsTheRunAndKeepsTheStepsBefore) {
  const std::string path = temp_path("limited.csv");
  speedlabs::CsvLog csv(path, kCsvHeader);
  csv.add("fp32,0,10.9,1,1");
  const std::string before = speedlabs::read_file(path);
  with_file_size_limit(before.size() + 8, [&] {  // room for the file so far, not for one more line
    try {
      csv.add("fp32,1,10.5,1,1");
      ADD_FAILURE() << "a failed write went unnoticed";
    } catch (const speedlabs::RuntimeFailure& e) {
      EXPECT_NE(std::string(e.what()).find("the 1 line(s) written before"), std::string::npos) << e.what();
    }
  });
  EXPECT_EQ(speedlabs::read_file(path), before);
  std::filesystem::remove(path);
}

// A disk too full for even the header: exit 3 saying nothing was written, the file at the path as it was,
// and no temporary file left beside it.
TEST(Lab05Csv, AHeaderThatCannotBeWrittenLeavesNothingBehind) {
  const std::string path = temp_path("full.csv");
  std::ofstream(path, std::ios::trunc) << "an earlier run's steps\n";
  with_file_size_limit(8, [&] {
    try {
      speedlabs::CsvLog csv(path, kCsvHeader);
      ADD_FAILURE() << "a header that could not be written went unnoticed";
    } catch (const speedlabs::RuntimeFailure& e) {
      EXPECT_NE(std::string(e.what()).find("nothing was written"), std::string::npos) << e.what();
    }
  });
  EXPECT_EQ(speedlabs::read_file(path), "an earlier run's steps\n");
  EXPECT_EQ(files_starting_with("lab05_full.csv"), std::vector<std::string>{"lab05_full.csv"});
  std::filesystem::remove(path);
}

// The memory a run needs is estimated before it starts: a run that cannot fit is a usage error at once
// (B=2000 of the 124M model: hundreds of GiB of logits and activations), the quick run fits anywhere.
TEST(Lab05Memory, ARunThatCannotFitIsRefusedBeforeItStarts) {
  const c10::Device cpu(c10::kCPU);
  EXPECT_NO_THROW(lab05::require_memory_fits(lab05::quick_config(), cpu));
  EXPECT_LT(lab05::estimate_memory(lab05::quick_config()).total(), 1024.0 * (1 << 20));
  lab05::Config huge;  // the chapter's gpt2 model, one mode
  huge.batch = 2000;
  EXPECT_GT(lab05::estimate_memory(huge).logits, 2000.0 * 128 * 50257 * 4);
  try {
    lab05::require_memory_fits(huge, cpu);
    ADD_FAILURE() << "a run of hundreds of GiB was accepted";
  } catch (const speedlabs::UsageError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("GiB"), std::string::npos) << message;
    EXPECT_NE(message.find("host memory"), std::string::npos) << message;
  }
  // The chapter's own run, gpt2 at B=4, T=128: its weights, gradients and AdamW state are 16 bytes a parameter.
  EXPECT_NEAR(lab05::estimate_memory(lab05::Config{}).training_state, 16.0 * 124'439'808, 1.0);
}

// Every output path is checked before any training: a bad one is a usage error at once.
TEST(Lab05Csv, OutputPathsAreCheckedBeforeTraining) {
  auto config = lab05::quick_config();
  speedlabs::Report report("05_gpt2", "cpu");
  config.csv_path = "/dev/full";  // a device is never replaced by a file
  EXPECT_THROW(lab05::run(config, c10::Device(c10::kCPU), report), speedlabs::UsageError);
  config.csv_path = "/nonexistent-folder/steps.csv";
  EXPECT_THROW(lab05::run(config, c10::Device(c10::kCPU), report), speedlabs::UsageError);
  config.csv_path = "-";  // standard output carries the run's log
  EXPECT_THROW(lab05::run(config, c10::Device(c10::kCPU), report), speedlabs::UsageError);
  config.csv_path.clear();
  config.plots_dir = "/dev/null";
  EXPECT_THROW(lab05::run(config, c10::Device(c10::kCPU), report), speedlabs::UsageError);
  EXPECT_TRUE(report.observations().empty()) << "nothing ran";
}

size_t line_count(const std::string& path) {
  std::ifstream in(path);
  size_t lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

// SIGTERM (or Ctrl-C) stops a run between two steps: exit 130 (interrupted), a line saying where it stopped, and a CSV
// of whole lines, one per finished step. The lab's own program, started and signalled as a user's shell would.
TEST(Lab05Interrupt, SigtermStopsBetweenStepsAndKeepsTheCsvWhole) {
  SPEEDLABS_REQUIRE_DATA();
  const std::string csv = temp_path("interrupted.csv"), log = temp_path("interrupted.log");
  std::filesystem::remove(csv);
  const std::string lab05 = speedlabs::program_path("lab05");
  std::vector<std::string> args{lab05,  "--quick", "--device", "cpu",   "--precision",
                                "fp32", "--steps", "100000",   "--csv", csv};
  const pid_t pid = speedlabs::testing::spawn_logged(args, log);
  ASSERT_GT(pid, 0) << "could not start " << args[0];
  // Signal once a few steps are in the CSV (header + 3); a minute is far more than the tiny model needs.
  for (int waited = 0; waited < 600 && line_count(csv) < 4; ++waited) usleep(100'000);
  ASSERT_GE(line_count(csv), 4u) << "the run wrote no steps in a minute";
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "ended by a signal instead of stopping between steps";
  EXPECT_EQ(WEXITSTATUS(status), speedlabs::kExitInterrupted);
  const std::string output = speedlabs::read_file(log);
  EXPECT_NE(output.find("interrupted at step"), std::string::npos) << output;
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "mode,step,loss,ms,tokens_per_s");
  int step = 0;
  for (; std::getline(in, line); ++step) {
    EXPECT_EQ(line.rfind("fp32," + std::to_string(step) + ",", 0), 0u) << "line " << step + 2 << ": " << line;
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), 4) << line;
  }
  EXPECT_GE(step, 3);
  std::filesystem::remove(csv);
  std::filesystem::remove(log);
}

TEST(Lab05Observations, SequenceLongerThanTheBlockIsAUsageError) {
  auto config = lab05::quick_config();
  config.seq = gpt::GPTConfig::tiny().block_size + 1;
  speedlabs::Report report("05_gpt2", "cpu");
  EXPECT_THROW(lab05::run(config, c10::Device(c10::kCPU), report), speedlabs::UsageError);
}

}  // namespace
