// Lab 12: the chunked head and the fused op on their own, and every observation of a small run through the same
// experiment the program runs (on the CPU, in seconds).
#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <string>
#include <tuple>
#include <vector>

#include "chunked_head.h"
#include "common/device.h"
#include "common/errors.h"
#include "common/observations.h"
#include "experiment.h"
#include "fused_gelu.h"
#include "fused_op.h"
#include "memory_claims.h"
#include "tests/support/expect.h"
#include "tests/support/timed.h"

namespace {

using speedlabs::Verdict;
using speedlabs::testing::tensors_close;

TEST(Lab12ChunkedHead, EqualsThePlainHeadForAnyChunkIncludingBatchedShapes) {
  torch::manual_seed(1);
  const auto hidden = torch::randn({2, 13, 16});
  const auto weight = torch::randn({500, 16}) * 0.3;
  const auto targets = torch::randint(500, {2, 13}, torch::kLong);
  const auto plain = lab12::plain_cross_entropy(hidden, weight, targets);
  for (const int64_t chunk : {1, 5, 26, 100}) {
    EXPECT_TRUE(tensors_close(lab12::chunked_cross_entropy(hidden, weight, targets, chunk), plain, 0, 1e-5,
                              "loss with chunks of " + std::to_string(chunk)));
  }
}

TEST(Lab12ChunkedHead, ChunkBelowOneIsAUsageError) {
  const auto hidden = torch::randn({4, 8});
  EXPECT_THROW(lab12::chunked_cross_entropy(hidden, torch::randn({10, 8}), torch::zeros({4}, torch::kLong), 0),
               speedlabs::UsageError);
}

TEST(Lab12FusedGelu, MatchesTheUnfusedChainForRowsOfAnyWidth) {
  torch::manual_seed(2);
  for (const int64_t cols : {1, 7, 64, 1000}) {
    const auto x = torch::randn({33, cols}) * 3;
    const auto bias = torch::randn({cols});
    EXPECT_TRUE(tensors_close(lab12::fused_bias_gelu(x, bias), lab12::unfused_bias_gelu(x, bias), lab12::kFusedAtol, 0,
                              "bias + GELU on (33, " + std::to_string(cols) + ")"));
  }
}

TEST(Lab12FusedGelu, MovesHalfTheBytes) {
  EXPECT_DOUBLE_EQ(lab12::fused_bytes(10, 100), 4.0 * (2 * 1000 + 100));
  EXPECT_DOUBLE_EQ(lab12::unfused_bytes(10, 100), 4.0 * (4 * 1000 + 100));
}

TEST(Lab12FusedGelu, CudaKernelMatchesOnAGpu) {
  if (!speedlabs::cuda_available() || !lab12::fused_kernel_built()) GTEST_SKIP() << "needs a CUDA GPU and nvcc";
  torch::manual_seed(3);
  const auto x = torch::randn({300, 3072}, torch::kCUDA);
  const auto bias = torch::randn({3072}, torch::kCUDA);
  EXPECT_TRUE(tensors_close(lab12::fused_bias_gelu(x, bias).cpu(), lab12::unfused_bias_gelu(x, bias).cpu(),
                            lab12::kFusedAtol, 0, "the CUDA kernel's bias + GELU"));
}

TEST(Lab12FusedGelu, TimedClaimMustHoldOnlyWhereMemoryBoundBeyondTheRoofsStreams) {
  const lab12::Config lesson;
  EXPECT_EQ(lab12::fused_claim_exemption(lesson.fused_rows, lesson.fused_cols, 4.0, lab12::kCpuRoofStreamMib), "");
  // A ridge below the op's 1.25 FLOP/byte: compute bound, nothing for fewer bytes to buy.
  EXPECT_NE(lab12::fused_claim_exemption(lesson.fused_rows, lesson.fused_cols, 1.0, lab12::kCpuRoofStreamMib), "");
  // 48 MiB arrays against the roof's 64 MiB streams: the caches may serve part of them.
  EXPECT_NE(lab12::fused_claim_exemption(4096, 3072, 4.0, lab12::kCpuRoofStreamMib), "");
}

TEST(Lab12MemoryClaims, PredictedPeakFollowsTheChunkNotTheBatch) {
  constexpr int64_t kVocab = 50257;
  const auto p = lab12::predicted_peak(512, 64, 64, kVocab);
  EXPECT_DOUBLE_EQ(p.plain, 3.0 * 512 * kVocab);
  EXPECT_DOUBLE_EQ(p.chunked, 2.0 * 64 * kVocab);
  EXPECT_DOUBLE_EQ(lab12::predicted_peak(2048, 256, 768, kVocab).chunked, (256.0 + 768) * kVocab);
  // A chunk above the rows holds only the rows.
  EXPECT_DOUBLE_EQ(lab12::predicted_peak(64, 1000, 64, kVocab).chunked, 2.0 * 64 * kVocab);
}

TEST(Lab12MemoryClaims, MustHoldOnlyWhereTheSizesPredictThem) {
  constexpr int64_t kVocab = 50257;
  // The default run (GPT-2's C = 768, B x T = 2048, chunks of 256) and --quick (C = 64, 512, 64): both must hold.
  for (const auto& [rows, chunk, width] : {std::tuple{2048, 256, 768}, std::tuple{512, 64, 64}}) {
    EXPECT_EQ(lab12::peak_claim_exemption(rows, chunk, width, kVocab), "") << rows << " " << chunk;
    EXPECT_EQ(lab12::gpt_peak_claim_exemption(rows, chunk, width, kVocab), "") << rows << " " << chunk;
  }
  // --quick --chunk 200: a chunk's logits are too close to a quarter of the plain head's.
  EXPECT_NE(lab12::peak_claim_exemption(512, 200, 64, kVocab), "");
  // --batch 1 (one sequence: B x T = T = the chunk), and a chunk at or above the rows: nothing to save.
  for (const auto& [rows, chunk, width] :
       {std::tuple{64, 64, 64}, std::tuple{256, 256, 768}, std::tuple{512, 4096, 64}}) {
    EXPECT_NE(lab12::peak_claim_exemption(rows, chunk, width, kVocab), "") << rows << " " << chunk;
    EXPECT_NE(lab12::gpt_peak_claim_exemption(rows, chunk, width, kVocab), "") << rows << " " << chunk;
  }
  // GPT-2's batch of 2 x 256: the weight's float32 gradient (V x 768) outweighs a quarter of 512 rows' logits.
  EXPECT_NE(lab12::peak_claim_exemption(512, 256, 768, kVocab), "");
}

TEST(Lab12Run, AChunkBeyondEveryRowIsAUsageError) {
  lab12::Config config = lab12::quick_config();
  config.batch = 2;
  config.seq = 32;
  config.chunk = 65;
  speedlabs::Report report("12_fusion", "cpu");
  EXPECT_THROW(lab12::run(config, c10::Device(c10::kCPU), report), speedlabs::UsageError);
  EXPECT_TRUE(report.observations().empty());
}

// A run whose chunk is as large as its one sequence (like --batch 1): the memory claims are reported, not failed,
// and every claim that must hold still holds (or could not be decided).
TEST(Lab12Run, AChunkAsLargeAsTheBatchReportsTheMemoryClaims) {
  lab12::Config config = lab12::quick_config();
  config.batch = 1;
  config.seq = 32;
  config.chunk = 32;
  config.gpt_steps = 2;
  config.fused_rows = 256;
  config.fused_cols = 1024;
  speedlabs::Report report("12_fusion", "cpu");
  lab12::run(config, c10::Device(c10::kCPU), report);
  for (const char* id : {"peak_memory_vs_plain", "gpt_step_with_chunked_head"}) {
    const auto& o = report.at(id);
    EXPECT_NE(o.expected.find("reported"), std::string::npos) << id << ": " << o.expected;
  }
  EXPECT_FALSE(report.at("peak_memory_vs_plain").must_hold);
  EXPECT_EQ(report.at("gpt_step_with_chunked_head").verdict, Verdict::holds)
      << report.at("gpt_step_with_chunked_head").measured.dump();
  EXPECT_NE(report.exit_code(), 1);
}

// One small run of the whole experiment on the CPU (one test, so CTest's one process per test runs it once).
TEST(Lab12Run, EveryObservationOfASmallRun) {
  lab12::Config config = lab12::quick_config();
  config.batch = 8;
  config.seq = 32;
  config.chunk = 24;  // does not divide B x T
  config.gpt_steps = 2;
  config.fused_rows = 512;
  config.fused_cols = 1024;
  speedlabs::Report report("12_fusion", "cpu");
  lab12::run(config, c10::Device(c10::kCPU), report);

  const std::vector<std::string> ids{"chunked_loss_vs_plain", "chunked_grads_match",        "peak_memory_vs_plain",
                                     "time_vs_plain",         "gpt_step_with_chunked_head", "fused_matches_unfused",
                                     "fused_bytes_moved",     "fused_vs_unfused_time"};
  ASSERT_EQ(report.observations().size(), ids.size());
  for (const auto& id : ids) ASSERT_TRUE(report.has(id)) << id;

  // Loss and gradients, float32 and bfloat16.
  for (const char* id : {"chunked_loss_vs_plain", "chunked_grads_match"}) {
    const auto& o = report.at(id);
    EXPECT_EQ(o.verdict, Verdict::holds) << id << ": " << o.measured.dump();
    EXPECT_TRUE(o.measured.contains("float32") && o.measured.contains("bfloat16")) << o.measured.dump();
  }

  // The chunked peak: a quarter of the plain one at the largest size, and it hardly grows with B x T.
  const auto& peak = report.at("peak_memory_vs_plain");
  EXPECT_EQ(peak.verdict, Verdict::holds) << peak.measured.dump();
  const auto& sizes = peak.measured["sizes"];
  ASSERT_EQ(sizes.size(), 3u);
  const double plain_growth = sizes[2]["plain_MiB"].get<double>() - sizes[0]["plain_MiB"].get<double>();
  const double chunked_growth = sizes[2]["chunked_MiB"].get<double>() - sizes[0]["chunked_MiB"].get<double>();
  // From 64 to 256 rows the plain head adds at least two (rows, V) float32 tensors' worth: 192 x V x 8 bytes.
  EXPECT_GE(plain_growth, 192.0 * 50257 * 8 / (1 << 20)) << peak.measured.dump();
  EXPECT_LT(chunked_growth, plain_growth / 4) << peak.measured.dump();

  // GPT-2 steps: the same losses, a lower peak.
  const auto& gpt = report.at("gpt_step_with_chunked_head");
  EXPECT_EQ(gpt.verdict, Verdict::holds) << gpt.measured.dump();
  EXPECT_EQ(gpt.measured["plain_losses"].size(), 2u);

  // The fused op.
  EXPECT_EQ(report.at("fused_matches_unfused").verdict, Verdict::holds) << report.at("fused_matches_unfused").measured;
  EXPECT_NEAR(report.at("fused_bytes_moved").measured["ratio"].get<double>(), 0.5, 0.01);

  // Timed and reported: a decided "fails" (slower than the goal on this machine) is allowed; a verdict without
  // the measurement layer's evidence is not.
  for (const char* id : {"time_vs_plain", "fused_vs_unfused_time"}) {
    const auto& o = report.at(id);
    EXPECT_FALSE(o.must_hold) << id << " is reported, not a must-hold";
    EXPECT_TRUE(speedlabs::testing::timed_with_evidence(o)) << id;
  }
  const auto& fused = report.at("fused_vs_unfused_time");
  // 2 MiB arrays, inside the caches: reported, whatever ridge a busy machine measured.
  EXPECT_EQ(fused.expected.rfind("reported (", 0), 0u) << fused.expected;
  EXPECT_GT(fused.measured["memory_roof_GBps"].get<double>(), 0);
  EXPECT_GT(fused.measured["ridge_flop_per_byte"].get<double>(), 0);
  EXPECT_GT(fused.measured["fused_share_of_roof"].get<double>(), 0);
}

}  // namespace
