// The roofline engine (common/roofline): the measured roofs, and where a GPT-2 step's ops sit under them.
#include "common/roofline.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "common/gpt.h"

namespace {

namespace gpt = speedlabs::gpt;
const c10::Device kCpu(c10::kCPU);

TEST(Roofline, PeaksAreMeasuredAndIntensitiesFollowTheirCounts) {
  const auto roofline = speedlabs::measure_roofline(gpt::GPTConfig::tiny(), 2, 16, kCpu, 128, 8, {1, 3});
  const auto& peaks = roofline.peaks;
  EXPECT_GT(peaks.fp32_flops, 0);
  EXPECT_GT(peaks.bf16_flops, 0);
  EXPECT_GT(peaks.copy_bytes, 0);
  EXPECT_GT(peaks.triad_bytes, 0);
  EXPECT_DOUBLE_EQ(peaks.ridge(), peaks.fp32_flops / peaks.bandwidth());
  EXPECT_DOUBLE_EQ(speedlabs::attainable_flops(peaks, 1e9), peaks.fp32_flops) << "far right: the compute roof";
  EXPECT_DOUBLE_EQ(speedlabs::attainable_flops(peaks, 1e-6), 1e-6 * peaks.bandwidth()) << "far left: the memory roof";

  // The roofs and the ops ran in the same rounds; a roof is its best round, an op its median.
  ASSERT_EQ(roofline.timings.sides.size(), speedlabs::kRoofSides + 6);
  EXPECT_EQ(roofline.timings.sides[speedlabs::kFp32Matmul].samples_ms.size(), 3u);
  EXPECT_DOUBLE_EQ(peaks.fp32_flops,
                   roofline.matmul_flops / (roofline.timings.sides[speedlabs::kFp32Matmul].min_ms / 1e3));
  EXPECT_EQ(roofline.elementwise_peak_share().count, 3);
  const auto& points = roofline.points;
  std::map<std::string, speedlabs::OpPoint> by_id;
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

}  // namespace
