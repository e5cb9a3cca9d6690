// Lab 07 on a CPU: the trace of one step, the per-op cost (C++ and the Python peer), the roofline's
// arithmetic, the document loader, and every observation of a --quick run through the same experiment.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "common/errors.h"
#include "common/files.h"
#include "common/gpt.h"
#include "datasets/data_files.h"
#include "experiment.h"
#include "feeding.h"
#include "op_cost.h"
#include "roofline.h"
#include "tests/support/data.h"
#include "tests/support/timed.h"
#include "trace.h"

namespace {

namespace gpt = speedlabs::gpt;
namespace fs = std::filesystem;
using speedlabs::Verdict;

const c10::Device kCpu(c10::kCPU);

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("lab07_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A tiny model on two short sequences: a step takes milliseconds.
struct TinyRun {
  gpt::GPTConfig config = gpt::GPTConfig::tiny();
  gpt::GPT model{nullptr};
  std::unique_ptr<torch::optim::AdamW> optimizer;
  torch::Tensor x, y;
  TinyRun() {
    torch::manual_seed(0);
    model = gpt::GPT(config);
    optimizer = std::make_unique<torch::optim::AdamW>(gpt::make_adamw(model, 1e-3));
    x = torch::randint(config.vocab_size, {2, 16}, torch::kLong);
    y = torch::randint(config.vocab_size, {2, 16}, torch::kLong);
  }
  torch::Tensor step() { return lab07::ranged_train_step(model, *optimizer, x, y); }
};

TEST(Lab07Trace, OneStepWithItsRangesOpsAndSelfTimes) {
  TinyRun run;
  run.step();  // the warm-up step, before the profiler
  const fs::path dir = fresh_dir("trace");
  const std::string path = (dir / "step.json").string();
  const auto profile = lab07::profile_step([&] { return run.step(); }, kCpu, path);

  for (const auto& range : lab07::step_ranges()) {
    EXPECT_EQ(profile.range_count.count(range) ? profile.range_count.at(range) : 0, 1)
        << range << " must appear once: one profiled step, the warm-up step left out";
    EXPECT_GT(profile.range_ms.at(range), 0) << range;
  }
  EXPECT_GT(profile.op_calls, 20) << "a GPT step is dozens of top-level ops";
  ASSERT_FALSE(profile.ops.empty());
  double self_sum = 0;
  std::set<std::string> names;
  for (size_t i = 0; i < profile.ops.size(); ++i) {
    const auto& op = profile.ops[i];
    EXPECT_GE(op.self_ms, 0) << op.name;
    if (i > 0) EXPECT_LE(op.self_ms, profile.ops[i - 1].self_ms) << "ranked by self time, largest first";
    EXPECT_DOUBLE_EQ(op.share, op.self_ms / profile.step_ms);
    self_sum += op.self_ms;
    names.insert(op.name);
  }
  // Self times never count a moment twice: together they fit in the step (1% for timestamp rounding).
  EXPECT_LE(self_sum, 1.01 * profile.step_ms);
  EXPECT_TRUE(names.count("aten::addmm") || names.count("aten::mm")) << "the step's matmuls are in the trace";
  EXPECT_TRUE(names.count("forward") == 0) << "the named ranges are not ops";
  EXPECT_EQ(profile.cuda_kernels, 0) << "no GPU kernels on a CPU";
  EXPECT_TRUE(std::isfinite(profile.loss));

  // The trace is whole JSON and holds the ranges; no temporary file is left beside it.
  const auto trace = nlohmann::json::parse(speedlabs::read_file(path));
  std::set<std::string> events;
  for (const auto& event : trace.at("traceEvents")) {
    if (event.contains("name") && event["name"].is_string()) events.insert(event["name"].get<std::string>());
  }
  for (const auto& range : lab07::step_ranges()) EXPECT_TRUE(events.count(range)) << range << " not in the trace";
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1) << "only the trace is left";
}

// A full disk, played by a file-size limit (a write past it fails as on a full disk): the run stops with a
// message that says the trace could not be written, and no temporary file is left beside it.
TEST(Lab07Trace, AFullDiskLeavesNoTemporaryFile) {
  TinyRun run;
  const fs::path dir = fresh_dir("trace_full");
  rlimit previous{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &previous), 0);
  const auto previous_handler = signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead of a signal
  const rlimit small{4096, previous.rlim_max};
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    lab07::profile_step([&] { return run.step(); }, kCpu, (dir / "step.json").string());
  } catch (const speedlabs::RuntimeFailure& e) {
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &previous);
  signal(SIGXFSZ, previous_handler);
  EXPECT_NE(message.find("cannot write the trace"), std::string::npos) << message;
  for (const auto& entry : fs::directory_iterator(dir)) ADD_FAILURE() << "left behind: " << entry.path();
}

TEST(Lab07Trace, AnUnwritableTraceIsARuntimeFailure) {
  TinyRun run;
  EXPECT_THROW(lab07::profile_step([&] { return run.step(); }, kCpu, "/nonexistent-folder/step.json"),
               speedlabs::RuntimeFailure);
}

TEST(Lab07OpCost, CppCostIsMicrosecondsAndAMissingPythonIsReported) {
  const auto cost = lab07::measure_op_cost_cpp(kCpu, {200, 3, 1});
  EXPECT_GT(cost.add_us, 0);
  EXPECT_GT(cost.linear_us, 0);
  EXPECT_LT(cost.add_us, 1e4) << "a 1-element add is microseconds, not tens of milliseconds";
  std::string failure;
  EXPECT_FALSE(lab07::measure_op_cost_python("/nonexistent/python", kCpu, {10, 1, 0}, failure).has_value());
  EXPECT_NE(failure.find("/nonexistent/python"), std::string::npos) << failure;
}

TEST(Lab07Roofline, PeaksAreMeasuredAndIntensitiesFollowTheirCounts) {
  const auto roofline = lab07::measure_roofline(gpt::GPTConfig::tiny(), 2, 16, kCpu, 128, 8, {1, 3});
  const auto& peaks = roofline.peaks;
  EXPECT_GT(peaks.fp32_flops, 0);
  EXPECT_GT(peaks.bf16_flops, 0);
  EXPECT_GT(peaks.copy_bytes, 0);
  EXPECT_GT(peaks.triad_bytes, 0);
  EXPECT_DOUBLE_EQ(peaks.ridge(), peaks.fp32_flops / peaks.bandwidth());
  EXPECT_DOUBLE_EQ(lab07::attainable_flops(peaks, 1e9), peaks.fp32_flops) << "far right: the compute roof";
  EXPECT_DOUBLE_EQ(lab07::attainable_flops(peaks, 1e-6), 1e-6 * peaks.bandwidth()) << "far left: the memory roof";

  // The roofs and the ops ran in the same rounds; a roof is its best round, an op its median.
  ASSERT_EQ(roofline.timings.sides.size(), lab07::kRoofSides + 6);
  EXPECT_EQ(roofline.timings.sides[lab07::kFp32Matmul].samples_ms.size(), 3u);
  EXPECT_DOUBLE_EQ(peaks.fp32_flops, roofline.matmul_flops / (roofline.timings.sides[lab07::kFp32Matmul].min_ms / 1e3));
  EXPECT_EQ(roofline.elementwise_peak_share().count, 3);
  const auto& points = roofline.points;
  std::map<std::string, lab07::OpPoint> by_id;
  for (const auto& p : points) {
    EXPECT_GT(p.ms, 0) << p.id;
    by_id[p.id] = p;
  }
  ASSERT_EQ(by_id.size(), 6u);
  // Elementwise ops: FLOPs per element over 8 bytes (4 read, 4 written); AdamW 14 FLOPs over 7 float arrays.
  EXPECT_DOUBLE_EQ(by_id.at("gelu").intensity(), 9.0 / 8);
  EXPECT_DOUBLE_EQ(by_id.at("layer_norm").intensity(), 8.0 / 8);
  EXPECT_DOUBLE_EQ(by_id.at("softmax").intensity(), 5.0 / 8);
  EXPECT_DOUBLE_EQ(by_id.at("adamw").intensity(), 14.0 / 28);
  for (const auto& id : {"gelu", "layer_norm", "softmax", "adamw"}) EXPECT_TRUE(by_id.at(id).elementwise) << id;
  // (32 x 64) x (64 x 256): 2*32*64*256 FLOPs over 4*(32*64 + 256*64 + 256 + 32*256) bytes.
  EXPECT_DOUBLE_EQ(by_id.at("matmul_mlp").flops, 2.0 * 32 * 64 * 256);
  EXPECT_DOUBLE_EQ(by_id.at("matmul_mlp").bytes, 4.0 * (32 * 64 + 256 * 64 + 256 + 32 * 256));
  EXPECT_DOUBLE_EQ(by_id.at("matmul_lm_head").flops, 2.0 * 32 * 64 * 50257);
  EXPECT_DOUBLE_EQ(by_id.at("matmul_lm_head").bytes, 4.0 * (32 * 64 + 50257 * 64 + 32 * 50257));
  EXPECT_GT(by_id.at("matmul_lm_head").intensity(), 5 * by_id.at("gelu").intensity());
}

TEST(Lab07Feeding, DocumentBatchesAreDeterministicShiftedAndPinnedOnlyWhenAsked) {
  SPEEDLABS_REQUIRE_DATA({datasets::kShakespearePath, datasets::kVocabBpePath});
  const auto dir = datasets::resolve_data_dir();
  const auto tokenizer = datasets::GPT2Tokenizer::load(dir);
  const std::string text = speedlabs::read_file(datasets::require_file(dir, datasets::kShakespearePath).string());
  const lab07::DocumentBatches batches(tokenizer, text, 3, 16, 2048, false);
  const auto a = batches.make(5);
  const auto b = batches.make(5);
  const auto c = batches.make(6);
  EXPECT_TRUE(torch::equal(a.x, b.x) && torch::equal(a.y, b.y)) << "batch 5 twice must be the same batch";
  EXPECT_FALSE(torch::equal(a.x, c.x)) << "batches 5 and 6 come from other documents";
  EXPECT_EQ(a.x.sizes(), (std::vector<int64_t>{3, 16}));
  EXPECT_TRUE(torch::equal(a.x.narrow(1, 1, 15), a.y.narrow(1, 0, 15))) << "y is x shifted by one token";
  EXPECT_GE(a.x.min().item<int64_t>(), 0);
  EXPECT_LT(a.x.max().item<int64_t>(), datasets::GPT2Tokenizer::kVocabSize);
  EXPECT_FALSE(a.x.is_pinned());
  // A crop of T+1 tokens must fit in every document.
  EXPECT_THROW(lab07::DocumentBatches(tokenizer, text, 3, 16, 64, false), speedlabs::UsageError);
  EXPECT_THROW(lab07::DocumentBatches(tokenizer, "short", 3, 16, 2048, false), speedlabs::UsageError);
}

TEST(Lab07Feeding, ThePrefetchedStepsGetTheMakersBatches) {
  SPEEDLABS_REQUIRE_DATA({datasets::kShakespearePath, datasets::kVocabBpePath});
  const auto dir = datasets::resolve_data_dir();
  const auto tokenizer = datasets::GPT2Tokenizer::load(dir);
  const lab07::DocumentBatches batches(
      tokenizer, speedlabs::read_file(datasets::require_file(dir, datasets::kShakespearePath).string()), 2, 16, 4096,
      false);
  const auto feed = lab07::compare_loaders(batches, gpt::GPTConfig::tiny(), 1e-3, 1, 3, 2, kCpu);
  EXPECT_TRUE(feed.same_batches);
  EXPECT_GT(feed.load_ms, 0);
  EXPECT_GT(feed.sync_step_ms, 0);
  EXPECT_GT(feed.prefetch_step_ms, 0);
  EXPECT_GE(feed.wait_ms, 0);
  EXPECT_FALSE(feed.all_pinned) << "no pinned memory on a CPU run";
  EXPECT_EQ(feed.torch_threads, std::max(1, std::min(at::get_num_threads(), feed.cores - 1)))
      << "the training step leaves a core to the loader's worker";
  EXPECT_TRUE(std::isfinite(feed.last_loss));
  EXPECT_GE(feed.free_cores, 1.0);
  EXPECT_LE(feed.free_cores, 2.0);
}

// The ids of the README's "What you should observe" table, in its order.
std::vector<std::string> readme_ids() {
  const std::string readme = speedlabs::read_file(SPEEDLABS_SOURCE_DIR "/labs/07_profile/README.md");
  const auto start = readme.find("## What you should observe");
  const auto end = readme.find("\n## ", start + 1);
  std::istringstream table(readme.substr(start, end - start));
  std::vector<std::string> ids;
  const std::regex row(R"(^\| `([a-z0-9_]+)` \|)");
  std::smatch match;
  for (std::string line; std::getline(table, line);) {
    if (std::regex_search(line, match, row)) ids.push_back(match[1]);
  }
  return ids;
}

// One --quick run of the whole experiment on the CPU, with the Python peer when one is configured.
TEST(Lab07Experiment, EveryObservationOfAQuickCpuRun) {
  SPEEDLABS_REQUIRE_DATA({datasets::kShakespearePath, datasets::kVocabBpePath});
  lab07::Config config = lab07::quick_config();
  config.batch = 2;
  config.seq = 32;
  config.python = SPEEDLABS_DEFAULT_PYTHON;
  config.op_calls = 200;
  config.feed_steps = 4;
  const fs::path dir = fresh_dir("run");
  config.trace_path = (dir / "trace.json").string();
  config.plots_dir = (dir / "plots").string();
  speedlabs::Report report("07_profile", "cpu");
  lab07::run(config, kCpu, report);

  std::vector<std::string> ids;
  for (const auto& o : report.observations()) ids.push_back(o.id);
  EXPECT_EQ(ids, readme_ids()) << "the README's table lists exactly the observations the lab reports";

  for (const auto& id : {"trace_has_step_ranges", "top_ops_by_self_time", "trace_written", "prefetch_same_batches"}) {
    EXPECT_EQ(report.at(id).verdict, Verdict::holds) << id << ": " << report.at(id).measured.dump();
  }
  // Timed: holds where this run decided; a busy machine or a point above its roof leaves it undecided.
  EXPECT_TRUE(speedlabs::testing::timed_holds_unless_undecided(report.at("elementwise_ops_are_memory_bound")));
  EXPECT_EQ(report.at("gpu_kernels_in_trace").verdict, Verdict::not_applicable);
  EXPECT_EQ(report.at("batches_pinned").verdict, Verdict::not_applicable);
  for (const auto& id : {"op_overhead_cpp_us", "op_overhead_python_us", "op_overhead_python_over_cpp",
                         "step_host_overhead_share", "peak_matmul_flops", "peak_bandwidth", "loader_cost_ms"}) {
    EXPECT_FALSE(report.at(id).must_hold) << id << " is reported, never asserted";
  }
  const auto& cpp = report.at("op_overhead_cpp_us").measured;
  EXPECT_GT(cpp.at("add").get<double>(), 0);
  if (std::string(SPEEDLABS_DEFAULT_PYTHON).empty()) {
    EXPECT_EQ(report.at("op_overhead_python_us").verdict, Verdict::not_applicable);
  } else {
    const auto& ratio = report.at("op_overhead_python_over_cpp").measured;
    const auto& python = report.at("op_overhead_python_us").measured;
    EXPECT_DOUBLE_EQ(ratio.at("add").get<double>(), python.at("add").get<double>() / cpp.at("add").get<double>());
    // The 2x goal is reported: its verdict follows the measured ratios, whatever they are on this machine.
    const bool goal = std::min(ratio.at("add").get<double>(), ratio.at("linear").get<double>()) >= 2.0;
    const auto& verdict = report.at("op_overhead_python_over_cpp");
    EXPECT_TRUE(speedlabs::testing::timed_with_evidence(verdict));
    if (verdict.verdict != Verdict::inconclusive) EXPECT_EQ(verdict.verdict, goal ? Verdict::holds : Verdict::fails);
  }
  const auto& share = report.at("step_host_overhead_share").measured;
  EXPECT_NEAR(share.at("overhead_ms").get<double>(),
              share.at("ops_per_step").get<double>() * share.at("us_per_op").get<double>() / 1e3, 1e-9);
  for (const auto& id : {"matmul_mlp", "matmul_lm_head", "gelu", "layer_norm", "softmax", "adamw"}) {
    EXPECT_TRUE(report.has(std::string("roofline_") + id)) << id;
  }
  // The prefetch verdict is a timing on a shared machine: check that it applies its rule to what it measured.
  const auto& prefetch = report.at("prefetch_hides_loading");
  if (prefetch.verdict != Verdict::not_applicable) {
    EXPECT_TRUE(speedlabs::testing::timed_holds_unless_undecided(prefetch));
    // A share of the loading time is at most 1 (plus the stated tolerance): beyond it, no verdict.
    if (prefetch.verdict == Verdict::holds) EXPECT_LE(prefetch.measured.at("hidden_share").get<double>(), 1.1);
  } else {
    // Not applicable only without a second core, or when a probe found no second core free for this run.
    EXPECT_TRUE(std::thread::hardware_concurrency() < 2 || prefetch.reason.find("got only") != std::string::npos)
        << prefetch.reason;
  }
  EXPECT_TRUE(fs::exists(dir / "plots" / "lab07_top_ops.svg") || !fs::exists("/usr/bin/gnuplot"));
  EXPECT_TRUE(fs::exists(dir / "plots" / "lab07_roofline.svg") || !fs::exists("/usr/bin/gnuplot"));
}

}  // namespace
