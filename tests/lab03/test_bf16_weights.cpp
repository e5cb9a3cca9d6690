// Lab 03 below 16 bits: a tiny GPT with bf16 weights, stored four ways, against float32 weights.
#include <gtest/gtest.h>

#include <cmath>

#include "bf16_weights.h"
#include "experiment.h"
#include "tests/support/data.h"

namespace {

TEST(Lab03Bf16Weights, RunsAreReproducibleAndStartTogether) {
  SPEEDLABS_REQUIRE_DATA();
  auto config = lab03::quick_config();
  config.steps = 3;
  const auto fp32 = lab03::train_with_weight_storage(config, lab03::WeightStorage::fp32);
  const auto again = lab03::train_with_weight_storage(config, lab03::WeightStorage::fp32);
  const auto kahan = lab03::train_with_weight_storage(config, lab03::WeightStorage::bf16_kahan);
  ASSERT_EQ(fp32.losses.size(), 3u);
  EXPECT_EQ(fp32.losses, again.losses);
  // The same bf16 start and the same first batch: the first loss is the same whatever the storage.
  EXPECT_EQ(fp32.losses.front(), kahan.losses.front());
  EXPECT_NEAR(fp32.losses.front(), std::log(256.0), 0.2);  // a fresh model guesses about uniformly over 256 bytes
}

TEST(Lab03Bf16Weights, ObservationsOverTheQuickRun) {
  SPEEDLABS_REQUIRE_DATA();
  speedlabs::Report report("03_mixed_precision", "cpu");
  lab03::observe_bf16_weights(lab03::quick_config(), report);
  EXPECT_FALSE(report.at("bf16_weights_losses").must_hold);
  EXPECT_EQ(report.at("stochastic_rounding_tracks_fp32_loss").verdict, speedlabs::Verdict::holds);
  EXPECT_EQ(report.at("kahan_tracks_fp32_loss").verdict, speedlabs::Verdict::holds);
}

}  // namespace
