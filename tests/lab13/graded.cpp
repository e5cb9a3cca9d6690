// Lab 13 graded tests: the student's trainer keeps the speedrun's contract, reaches a target, and its speed
// against the lab's baseline in the same run earns the speed points. ./lab check 13 runs them.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <set>

#include "common/gpt.h"
#include "labs/13_speedrun/exercise.h"
#include "labs/13_speedrun/src/experiment.h"
#include "labs/13_speedrun/src/outputs.h"
#include "labs/13_speedrun/src/task.h"
#include "tests/lab13/speed_rules.h"
#include "tests/support/data.h"
#include "tests/support/speed.h"

namespace {

namespace gpt = speedlabs::gpt;

// The graded race: the quick model to a target the baseline reaches in a few hundred steps on a 2-core CPU.
lab13::Config graded_config() {
  lab13::Config config = lab13::quick_config();
  config.progress_bar = false;
  return config;
}

TEST(Lab13_make_trainer, TrainsTheModelItIsGivenAndHandsBackEveryWeight) {
  std::vector<int32_t> ids(20000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7919) % lab13::kVocabulary);
  lab13::TrainerConfig config;
  config.model = lab13::model_of(graded_config());
  config.recipe.batch = 4;
  config.recipe.seq = 32;
  config.max_steps = 3;
  config.train_tokens = std::make_shared<const std::vector<int32_t>>(ids);
  auto trainer = lab13::make_trainer();
  ASSERT_NE(trainer, nullptr) << "make_trainer() returned no trainer";
  trainer->init(config);
  gpt::NamedTensors before = trainer->weights();
  for (auto& named : before) named.second = named.second.clone();  // weights() may hand back the live tensors
  for (int s = 0; s < 3; ++s) trainer->step();
  const gpt::NamedTensors after = trainer->weights();
  gpt::GPT reference(config.model);
  std::set<std::string> expected, given;
  for (const auto& p : reference->named_parameters()) expected.insert(p.key());
  for (const auto& [name, tensor] : after) {
    given.insert(name);
    EXPECT_EQ(tensor.scalar_type(), torch::kFloat) << name << " must be float32";
    EXPECT_TRUE(torch::isfinite(tensor).all().item<bool>()) << name << " is not finite after 3 steps";
  }
  EXPECT_EQ(given, expected) << "weights() must name every parameter of the GPT, as named_parameters() does";
  ASSERT_EQ(before.size(), after.size());
  bool moved = false;
  for (size_t i = 0; i < before.size(); ++i) moved = moved || !torch::equal(before[i].second, after[i].second);
  EXPECT_TRUE(moved) << "three step() calls left every weight as init() made it";
}

TEST(Lab13_make_trainer, ReachesATargetWithinTheCap) {
  SPEEDLABS_REQUIRE_DATA();
  lab13::Config config = graded_config();
  config.target =
      3.8;  // one validation (ln 65 = 4.17 untrained): the contract; the speed test races to the quick target
  const lab13::Outcome outcome = lab13::race_once(config, lab13::make_trainer);
  EXPECT_TRUE(outcome.trainer.reached) << "your trainer: " << outcome.trainer.failure;
  EXPECT_TRUE(outcome.baseline.reached) << "the baseline: " << outcome.baseline.failure;
}

// Speed: the score (the baseline's time to the target over yours, side by side) earns the points between the
// thresholds of tests/lab13/points.tsv (none near 1, the baseline's own speed, with room for a run's scatter). The
// reference reaches the quick target well past full points (the kept run, docs/results/lab13.json, has each trainer's
// steps and the score).
TEST(Lab13_make_trainer_speed, ReachesTheTargetFasterThanTheBaseline) {
  SPEEDLABS_REQUIRE_DATA();
  speedlabs::testing::SpeedRule rule{lab13::speed_rules::make_trainer_speed.full,
                                     lab13::speed_rules::make_trainer_speed.zero};
  rule.attempts = 2;
  rule.best = "the baseline";
  speedlabs::testing::grade_speed_of(
      "your trainer's speed to the quick target",
      [&] {
        const lab13::Outcome outcome = lab13::race_once(graded_config(), lab13::make_trainer);
        EXPECT_TRUE(outcome.trainer.reached) << "your trainer: " << outcome.trainer.failure;
        // Both trainers CPU-bound, timed in alternating segments: a load may have slowed either alone.
        return speedlabs::Evidence(
            outcome.trainer.reached ? lab13::per_round_scores(outcome) : speedlabs::summarize_samples({0.0, 0.0, 0.0}),
            outcome.contention, speedlabs::LoadEffect::ratio);
      },
      rule);
}

}  // namespace
