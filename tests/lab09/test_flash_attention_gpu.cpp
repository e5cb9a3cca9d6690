// Lab 09 on a GPU: the CUDA kernel of flash_kernel.h against SDPA, and the GPU observations of a --quick run.
// Every test skips, saying why, where there is no GPU or the kernel was not compiled (no nvcc).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>

#include "common/device.h"
#include "common/observations.h"
#include "experiment.h"
#include "gpu_comparison.h"
#include "tests/support/expect.h"
#ifdef SPEEDLABS_LAB09_FLASH_KERNEL
#include "flash_kernel.h"
#endif

namespace {

using speedlabs::testing::tensors_close;

#define LAB09_REQUIRE_GPU_KERNEL()                                                              \
  do {                                                                                          \
    if (!speedlabs::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible to libtorch";        \
    if (!kHaveKernel) GTEST_SKIP() << "the kernel was not compiled (no nvcc in this build)";    \
  } while (0)

#ifdef SPEEDLABS_LAB09_FLASH_KERNEL
constexpr bool kHaveKernel = true;
#else
constexpr bool kHaveKernel = false;
#endif

TEST(Lab09Gpu, KernelMatchesSdpaAndItsLogSumExp) {
  LAB09_REQUIRE_GPU_KERNEL();
#ifdef SPEEDLABS_LAB09_FLASH_KERNEL
  const auto options = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat);
  for (const int64_t D : {32, 64}) {
    for (const int64_t T : {1, 63, 64, 65, 1000, 4096}) {
      torch::manual_seed(T + D);
      const auto q = torch::randn({2, 3, T, D}, options), k = torch::randn_like(q), v = torch::randn_like(q);
      auto out = torch::empty_like(q);
      auto lse = torch::empty({2, 3, T}, options);
      lab09::cuda::flash_attention_forward(q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
                                           out.data_ptr<float>(), lse.data_ptr<float>(), 2, 3, T, D);
      const std::string what = " at T=" + std::to_string(T) + ", head size " + std::to_string(D);
      const auto reference = at::scaled_dot_product_attention(q.to(torch::kDouble), k.to(torch::kDouble),
                                                               v.to(torch::kDouble), {}, 0.0, true);
      EXPECT_TRUE(tensors_close(out.cpu(), reference.cpu(), lab09::kGpuTolerance, 0, "out" + what));
      const auto future = torch::ones({T, T}, torch::kBool).triu(1);
      const auto scores = (torch::matmul(q.cpu().to(torch::kDouble), k.cpu().to(torch::kDouble).transpose(-2, -1)) /
                           std::sqrt(static_cast<double>(D)))
                              .masked_fill(future, -std::numeric_limits<double>::infinity());
      EXPECT_TRUE(tensors_close(lse.cpu(), torch::logsumexp(scores, -1), 1e-4, 1e-6, "lse" + what));
    }
  }
#endif
}

TEST(Lab09Gpu, UnsupportedHeadSizeIsRefused) {
  LAB09_REQUIRE_GPU_KERNEL();
#ifdef SPEEDLABS_LAB09_FLASH_KERNEL
  const auto q = torch::zeros({1, 1, 4, 48}, torch::TensorOptions().device(torch::kCUDA));
  auto out = torch::empty_like(q);
  auto lse = torch::empty({1, 1, 4}, q.options());
  EXPECT_THROW(lab09::cuda::flash_attention_forward(q.data_ptr<float>(), q.data_ptr<float>(), q.data_ptr<float>(),
                                                    out.data_ptr<float>(), lse.data_ptr<float>(), 1, 1, 4, 48),
               std::invalid_argument);
#endif
}

TEST(Lab09Gpu, QuickRunObservationsOnTheGpu) {
  LAB09_REQUIRE_GPU_KERNEL();
  speedlabs::Report report("09_flash_attention", "cuda");
  lab09::Config config = lab09::quick_config();
  config.progress_bar = false;
  lab09::compare_on_gpu(config, c10::Device(c10::kCUDA), report);
  const auto& match = report.at("cuda_kernel_matches_sdpa");
  EXPECT_EQ(match.verdict, speedlabs::Verdict::holds) << match.measured.dump() << " " << match.reason;
  const auto& time = report.at("cuda_kernel_vs_sdpa_time");
  EXPECT_EQ(time.verdict, speedlabs::Verdict::holds) << time.reason;
  EXPECT_GT(time.measured["kernel_ms"].get<double>(), 0.0);
}

}  // namespace
