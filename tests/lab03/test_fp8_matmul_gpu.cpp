// Lab 03's fp8 matmul, on a CUDA GPU only: skipped elsewhere, never a pass without one.
#include <gtest/gtest.h>

#include "common/device.h"
#include "common/observations.h"
#include "fp8_matmul.h"

TEST(Lab03Fp8MatmulGpu, ScaledMmMatchesBf16WithinFp8Precision) {
  if (!speedlabs::cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  speedlabs::Report report("03_mixed_precision", "cuda");
  lab03::observe_fp8_scaled_mm(c10::Device(c10::kCUDA), report);
  const auto& o = report.at("fp8_scaled_mm_vs_bf16");
  if (o.verdict == speedlabs::Verdict::not_applicable) GTEST_SKIP() << o.reason;  // a GPU without fp8 matmuls
  EXPECT_EQ(o.verdict, speedlabs::Verdict::holds) << o.measured.dump();
  EXPECT_GT(o.measured["fp8_ms"].get<double>(), 0);
}
