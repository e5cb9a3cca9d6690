// Lab 13's tests: the split, the limits, the evaluator, the race's rules (a trainer with non-finite weights or
// one that never reaches the target scores 0, with the reason), the observations and the record.
#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "common/build_paths.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/gpt.h"
#include "datasets/data_files.h"
#include "experiment.h"
#include "outputs.h"
#include "peer.h"
#include "recipe.h"
#include "task.h"

namespace {

namespace gpt = speedlabs::gpt;

std::vector<int32_t> fake_tokens(size_t n) {
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * 31) % 61);  // a short, learnable cycle
  return ids;
}

lab13::Config small_config() {
  lab13::Config config = lab13::quick_config();
  config.progress_bar = false;
  config.recipe.batch = 4;
  config.recipe.seq = 32;
  config.eval_every = 5;
  config.step_cap = 10;
  return config;
}

TEST(Lab13Task, TheSplitIsNanoGptsNinetyTen) {
  const std::vector<int32_t> tokens = fake_tokens(100001);
  const lab13::Split split = lab13::split_tokens(tokens);
  EXPECT_EQ(split.train_end, 90000) << "int(100001 * 0.9), as Python computes it";
  EXPECT_EQ(split.train_end, split.validation_begin);
  EXPECT_EQ(static_cast<int64_t>(split.train->size()), split.train_end);
  EXPECT_EQ(static_cast<int64_t>(split.validation.size()), 100001 - 90000);
  EXPECT_TRUE(std::equal(split.train->begin(), split.train->end(), tokens.begin()));
  EXPECT_TRUE(std::equal(split.validation.begin(), split.validation.end(), tokens.begin() + split.train_end));
  EXPECT_THROW(lab13::split_tokens(fake_tokens(500)), speedlabs::UsageError);
}

TEST(Lab13Task, TinyShakespeareIsSixtyFiveCharactersInByteOrder) {
  const std::vector<int32_t> ids = lab13::load_characters(datasets::resolve_data_dir());
  EXPECT_EQ(ids.size(), 1115394u) << "the file's bytes, one id each";
  EXPECT_EQ(*std::min_element(ids.begin(), ids.end()), 0);
  EXPECT_EQ(*std::max_element(ids.begin(), ids.end()), lab13::kVocabulary - 1);
  // "First Citizen:": 'F' is the 18th symbol ("\n", " ", "!", "$", "&", "'", ",", "-", ".", "3", ":", ";", "?",
  // "A" to "Z" ...), ':' the 11th.
  EXPECT_EQ(ids[0], 18);
  EXPECT_EQ(ids[13], 10);
}

TEST(Lab13Task, ModelsOutsideTheLimitsAreRefused) {
  gpt::GPTConfig ok = lab13::model_of(lab13::quick_config());
  EXPECT_NO_THROW(lab13::require_within_limits(ok));
  for (auto change : std::vector<std::function<void(gpt::GPTConfig&)>>{
           [](gpt::GPTConfig& m) { m.n_layer = 7; }, [](gpt::GPTConfig& m) { m.n_embd = 512; },
           [](gpt::GPTConfig& m) { m.n_head = 3; }, [](gpt::GPTConfig& m) { m.block_size = 32; },
           [](gpt::GPTConfig& m) { m.block_size = 1024; }, [](gpt::GPTConfig& m) { m.vocab_size = 100; }}) {
    gpt::GPTConfig bad = ok;
    change(bad);
    EXPECT_THROW(lab13::require_within_limits(bad), speedlabs::UsageError);
  }
}

TEST(Lab13Task, TargetsOutsideWhatTheEvaluatorCanReachAreRefused) {
  lab13::Config config = small_config();
  EXPECT_NO_THROW(lab13::check_config(config));
  config.target = lab13::kLowestTarget - 0.1;
  EXPECT_THROW(lab13::check_config(config), speedlabs::UsageError);
  config.target = 4.2;  // above ln 65: an untrained model is already there
  EXPECT_THROW(lab13::check_config(config), speedlabs::UsageError);
  config = small_config();
  config.record_to = "/dev/full";
  EXPECT_THROW(lab13::check_config(config), speedlabs::UsageError);
}

TEST(Lab13Task, TheEvaluatorScoresFreshWeightsNearLnVocabAndRefusesBadOnes) {
  const gpt::GPTConfig model = lab13::model_of(small_config());
  torch::manual_seed(1);
  gpt::GPT fresh(model);
  gpt::NamedTensors weights;
  for (const auto& p : fresh->named_parameters()) weights.emplace_back(p.key(), p.value().detach().clone());
  const std::vector<int32_t> validation = fake_tokens(16 * lab13::kEvalContext + 1);
  std::string problem;
  EXPECT_NEAR(lab13::evaluate(model, weights, validation, problem), std::log(65.0), 0.2);
  auto nan_weights = weights;
  nan_weights.front().second = nan_weights.front().second.clone().fill_(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(lab13::evaluate(model, nan_weights, validation, problem)));
  EXPECT_NE(problem.find(nan_weights.front().first), std::string::npos) << problem;
  auto missing = weights;
  missing.pop_back();
  EXPECT_THROW(lab13::evaluate(model, missing, validation, problem), speedlabs::RuntimeFailure);
}

// A trainer whose weights turn NaN after its first step.
class NanTrainer : public lab13::Trainer {
 public:
  void init(const lab13::TrainerConfig& config) override { inner_->init(config); }
  void step() override { inner_->step(); }
  gpt::NamedTensors weights() override {
    auto w = inner_->weights();
    w.front().second = w.front().second.clone().fill_(std::numeric_limits<float>::quiet_NaN());
    return w;
  }

 private:
  std::unique_ptr<lab13::Trainer> inner_ = lab13::make_baseline_trainer();
};

lab13::Outcome race_against(std::unique_ptr<lab13::Trainer> trainer, lab13::Config config) {
  auto tokens = fake_tokens(20000);
  lab13::Outcome o;
  o.split = lab13::split_tokens(tokens);
  o.split.validation.resize(16 * lab13::kEvalContext + 1);  // 16 windows: the rules, not the loss, are tested here
  auto contender = [&](const std::string& name, std::unique_ptr<lab13::Trainer> t) {
    lab13::Contender c;
    c.name = name;
    c.trainer = std::move(t);
    c.config.model = lab13::model_of(config);
    c.config.recipe = config.recipe;
    c.config.max_steps = config.step_cap;
    c.config.train_tokens = o.split.train;
    return c;
  };
  o.baseline = contender("baseline", lab13::make_baseline_trainer());
  o.trainer = contender("trainer", std::move(trainer));
  o.contention =
      lab13::race({&o.baseline, &o.trainer}, {config.target, config.step_cap, config.eval_every, &o.split, false});
  o.score = o.trainer.reached && o.baseline.reached ? o.baseline.total_ms() / o.trainer.total_ms() : 0;
  if (!o.trainer.reached) o.score_reason = "the trainer scores 0: " + o.trainer.failure;
  return o;
}

// A trainer that says it steps on its own B: the tokens/s and the MFU count that B, not the run's.
class OwnBatchTrainer : public lab13::Trainer {
 public:
  explicit OwnBatchTrainer(int64_t batch) : batch_(batch) {}
  void init(const lab13::TrainerConfig& config) override { inner_->init(config); }
  void step() override { inner_->step(); }
  gpt::NamedTensors weights() override { return inner_->weights(); }
  int64_t batch() const override { return batch_; }

 private:
  int64_t batch_;
  std::unique_ptr<lab13::Trainer> inner_ = lab13::make_baseline_trainer();
};

TEST(Lab13Race, AContendersBatchIsItsTrainersOwnWhenItNamesOne) {
  lab13::Contender c;
  c.config.recipe.batch = 16;
  c.trainer = std::make_unique<OwnBatchTrainer>(4);
  EXPECT_EQ(c.batch(), 4);
  c.trainer = std::make_unique<OwnBatchTrainer>(0);  // 0: the run's B
  EXPECT_EQ(c.batch(), 16);
}

TEST(Lab13Race, EachRoundsScoreCountsEverySequenceAtThatRoundsTimeASequence) {
  // The baseline: 4 steps of B=4 at 10 ms (2.5 ms a sequence, 40 ms in all). The trainer: 2 steps of B=1 at
  // 2.5 ms, then 2 of B=4 at 10 ms (2.5 ms a sequence, 10 sequences, 25 ms). Every round says 40 / 25 = 1.6;
  // counting steps instead of sequences would say 4 in the small rounds and 1 in the large ones.
  lab13::Outcome o;
  o.baseline.step_ms = {10, 10, 10, 10};
  o.baseline.step_batch = {4, 4, 4, 4};
  o.trainer.step_ms = {2.5, 2.5, 10, 10};
  o.trainer.step_batch = {1, 1, 4, 4};
  const speedlabs::Summary scores = lab13::per_round_scores(o);
  EXPECT_EQ(scores.count, 4) << "too few rounds to pool: one round a window";
  EXPECT_DOUBLE_EQ(scores.min, 1.6);
  EXPECT_DOUBLE_EQ(scores.max, 1.6);
}

TEST(Lab13Race, RoundsArePooledIntoWindowsSoOneStrayStepMovesOneSampleALittle) {
  // 50 rounds of 10 ms against 5 ms (score 2), one trainer step stalled to 55 ms: pooled five rounds a window, ten
  // samples; the stalled window says 50 / 75 (its five rounds), where the round alone said 10 / 55.
  lab13::Outcome o;
  o.baseline.step_ms.assign(50, 10);
  o.baseline.step_batch.assign(50, 4);
  o.trainer.step_ms.assign(50, 5);
  o.trainer.step_batch.assign(50, 4);
  o.trainer.step_ms[7] = 55;
  const speedlabs::Summary scores = lab13::per_round_scores(o);
  EXPECT_EQ(scores.count, 50 / lab13::kScoreWindow);
  EXPECT_DOUBLE_EQ(scores.median, 2.0);
  EXPECT_DOUBLE_EQ(scores.min, 50.0 / 75.0);
  EXPECT_DOUBLE_EQ(scores.max, 2.0);
}

TEST(Lab13Race, ATrainerWithNonFiniteWeightsScoresZeroWithTheReason) {
  lab13::Config config = small_config();
  config.recipe.lr = 1e-2;
  config.recipe.warmup_steps = 0;
  config.target = 4.1;  // ln 65 = 4.17 untrained; the 61-character cycle gave 4.04 after 10 steps at this rate
  const lab13::Outcome o = race_against(std::make_unique<NanTrainer>(), config);
  EXPECT_TRUE(o.baseline.reached) << o.baseline.failure;
  EXPECT_FALSE(o.trainer.reached);
  EXPECT_EQ(o.trainer.steps(), config.eval_every) << "it stops at its first validation";
  EXPECT_NE(o.trainer.failure.find("non-finite"), std::string::npos) << o.trainer.failure;
  speedlabs::Report report("13_speedrun", "cpu");
  lab13::record_observations(o, config, report);
  EXPECT_EQ(report.at("trainer_reaches_target").verdict, speedlabs::Verdict::fails);
  EXPECT_EQ(report.at("speedup_over_baseline").verdict, speedlabs::Verdict::fails);
  EXPECT_EQ(report.at("speedup_over_baseline").measured["score"], 0.0);
  EXPECT_EQ(report.at("baseline_reaches_target").verdict, speedlabs::Verdict::holds);
  EXPECT_EQ(report.at("validation_never_seen").verdict, speedlabs::Verdict::holds);
  EXPECT_TRUE(report.has("mfu_per_step"));
}

TEST(Lab13Race, ATrainerThatNeverReachesTheTargetStopsAtTheCapAndScoresZero) {
  lab13::Config config = small_config();
  config.target = lab13::kLowestTarget;  // far below what 10 steps give
  const lab13::Outcome o = race_against(lab13::make_baseline_trainer(), config);
  EXPECT_EQ(o.trainer.steps(), config.step_cap);
  EXPECT_FALSE(o.trainer.reached);
  EXPECT_NE(o.trainer.failure.find("step cap"), std::string::npos) << o.trainer.failure;
  EXPECT_EQ(o.score, 0.0);
  EXPECT_EQ(o.trainer.curve.size(), 2u) << "a validation every 5 steps' worth of sequences";
  EXPECT_GT(o.trainer.init_ms, 0.0) << "init() is timed";
}

// A trainer whose step() throws: it is out of the race, with the reason, and the others race on.
class ThrowingTrainer : public lab13::RecipeTrainer {
 public:
  void step() override { throw speedlabs::RuntimeFailure("a bug in step()"); }
};

TEST(Lab13Race, ATrainerThatThrowsIsOutOfTheRaceWithTheReason) {
  lab13::Config config = small_config();
  const lab13::Outcome o = race_against(std::make_unique<ThrowingTrainer>(), config);
  EXPECT_FALSE(o.trainer.reached);
  EXPECT_NE(o.trainer.failure.find("step 1 failed: a bug in step()"), std::string::npos) << o.trainer.failure;
  EXPECT_EQ(o.baseline.steps(), config.step_cap) << "the baseline raced on";
}

// A trainer whose weights() throws: the failure names the validation it broke, not a step that never ran.
class ThrowingWeightsTrainer : public lab13::RecipeTrainer {
 public:
  speedlabs::gpt::NamedTensors weights() override { throw speedlabs::RuntimeFailure("a bug in weights()"); }
};

TEST(Lab13Race, AThrowDuringAValidationNamesTheValidation) {
  lab13::Config config = small_config();
  const lab13::Outcome o = race_against(std::make_unique<ThrowingWeightsTrainer>(), config);
  EXPECT_EQ(o.trainer.steps(), config.eval_every) << "it stepped up to its first validation";
  const std::string expected = "the validation after step " + std::to_string(config.eval_every) +
                               " (weights(), then the evaluator) failed: a bug in weights()";
  EXPECT_NE(o.trainer.failure.find(expected), std::string::npos) << o.trainer.failure;
}

// A trainer that validates on a larger B is validated as often per sequence as the baseline.
class LargeBatchTrainer : public lab13::RecipeTrainer {
 protected:
  int64_t batch_size() const override { return 2 * config_.recipe.batch; }
};

TEST(Lab13Race, ValidationsComeEverySoManySequencesNotSteps) {
  lab13::Config config = small_config();
  config.target = lab13::kLowestTarget;
  const lab13::Outcome o = race_against(std::make_unique<LargeBatchTrainer>(), config);
  EXPECT_EQ(o.trainer.curve.size(), 4u) << "10 steps of 2 B: every 5 baseline steps' sequences, then the cap";
  ASSERT_FALSE(o.trainer.curve.empty());
  EXPECT_EQ(o.trainer.curve.front().step, 3) << "the first validation once 5 x 4 sequences are seen (3 x 8)";
}

TEST(Lab13Recipe, TheScheduleWarmsUpDecaysByCosineAndStaysAtTheFloor) {
  lab13::Recipe r;  // nanoGPT's: 1e-3 peak, 1e-4 floor, 100 warm-up steps, 2,000 to the floor
  EXPECT_DOUBLE_EQ(lab13::recipe_learning_rate(r, 0), 1e-3 / 101);
  EXPECT_DOUBLE_EQ(lab13::recipe_learning_rate(r, 99), 1e-3 * 100 / 101);
  EXPECT_DOUBLE_EQ(lab13::recipe_learning_rate(r, 100), 1e-3);
  EXPECT_NEAR(lab13::recipe_learning_rate(r, 1050), 5.5e-4, 1e-12) << "half way: the mean of peak and floor";
  EXPECT_NEAR(lab13::recipe_learning_rate(r, 2000), 1e-4, 1e-12);
  EXPECT_DOUBLE_EQ(lab13::recipe_learning_rate(r, 2500), 1e-4);
}

TEST(Lab13Recipe, WindowsAreDrawnFromTheSeedAndFitTheStream) {
  const torch::Tensor a = lab13::window_offsets(7, 50, 12, 1000, 64);
  EXPECT_TRUE(a.equal(lab13::window_offsets(7, 50, 12, 1000, 64)));
  EXPECT_FALSE(a.equal(lab13::window_offsets(8, 50, 12, 1000, 64)));
  EXPECT_EQ(a.sizes(), (std::vector<int64_t>{50, 12}));
  EXPECT_GE(a.min().item<int64_t>(), 0);
  EXPECT_LE(a.max().item<int64_t>(), 1000 - 64 - 1) << "T + 1 ids fit after the last start";
}

// The Python peer runs the baseline's recipe: from the same weights on the same windows its validation losses are
// the baseline's. Both compute in float32 with the attention written out, through the same libtorch kernels in a
// different op order: one rounding (6e-8) grows through 10 AdamW steps to ~1e-5 nat; a different recipe (another
// rate, clip or window) moves the loss by 0.01 or more.
TEST(Lab13Peer, ThePythonPeerTracksTheBaselineStepForStep) {
  const std::string python = speedlabs::configured_python();
  if (python.empty()) GTEST_SKIP() << "no Python with torch configured";
  lab13::Config config = small_config();
  config.python = python;
  config.target = lab13::kLowestTarget;
  auto tokens = fake_tokens(20000);
  lab13::Outcome o;
  o.split = lab13::split_tokens(tokens);
  lab13::Contender baseline, peer;
  for (lab13::Contender* c : {&baseline, &peer}) {
    c->config.model = lab13::model_of(config);
    c->config.recipe = config.recipe;
    c->config.max_steps = config.step_cap;
    c->config.train_tokens = o.split.train;
  }
  baseline.name = "baseline";
  baseline.trainer = lab13::make_baseline_trainer();
  peer.name = "python_eager";
  peer.trainer = std::make_unique<lab13::PythonPeer>(python, false, peer.config);
  lab13::race({&baseline, &peer}, {config.target, config.step_cap, config.eval_every, &o.split, false});
  ASSERT_EQ(peer.failure.find("failed"), std::string::npos) << peer.failure;
  ASSERT_EQ(peer.curve.size(), baseline.curve.size());
  for (size_t i = 0; i < peer.curve.size(); ++i) {
    EXPECT_NEAR(peer.curve[i].val_loss, baseline.curve[i].val_loss, 1e-3) << "validation " << i;
  }
}

TEST(Lab13Peer, APeerThatCannotStartSaysWhy) {
  lab13::TrainerConfig config;
  config.model = lab13::model_of(small_config());
  config.train_tokens = std::make_shared<const std::vector<int32_t>>(fake_tokens(5000));
  config.max_steps = 10;
  EXPECT_THROW(lab13::PythonPeer("/nonexistent/python", false, config), speedlabs::RuntimeFailure);
}

TEST(Lab13Record, ARecordIsAppendedWholeAndKeepsTheLinesBefore) {
  lab13::Config config = small_config();
  config.recipe.lr = 1e-2;
  config.recipe.warmup_steps = 0;
  config.target = 4.1;
  const lab13::Outcome o = race_against(lab13::make_baseline_trainer(), config);
  const auto folder = std::filesystem::temp_directory_path() / ("lab13-record-" + std::to_string(getpid()));
  std::filesystem::create_directories(folder);
  config.record_to = (folder / "records.jsonl").string();
  speedlabs::write_file_atomically(config.record_to, "{\"earlier\": 1}\n");
  lab13::write_outputs(o, config);
  std::ifstream in(config.record_to);
  std::string first, second, third;
  std::getline(in, first);
  std::getline(in, second);
  EXPECT_EQ(first, "{\"earlier\": 1}");
  const auto record = nlohmann::json::parse(second);
  for (const char* key :
       {"date", "cpu", "cores", "isas", "commit", "config", "score", "baseline_s", "trainer_s", "peers", "curves"}) {
    EXPECT_TRUE(record.contains(key)) << key;
  }
  EXPECT_FALSE(std::getline(in, third));
  std::filesystem::remove_all(folder);
}

}  // namespace
