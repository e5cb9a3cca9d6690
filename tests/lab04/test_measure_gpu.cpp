// Lab 04 on a GPU: the kernel against the CPU, synchronization in the timing exercise, and the lab's
// GPU observations. Every test skips where there is no GPU (or no CUDA compiler for the kernel).
#include <gtest/gtest.h>

#include <torch/types.h>
#include <torch/utils.h>

#include "common/device.h"
#include "common/timer.h"
#include "exercise.h"
#include "experiment.h"
#ifdef SPEEDLABS_LAB04_CUDA_KERNEL
#include "common/cuda/kernels.h"
#endif

namespace {

#ifdef SPEEDLABS_LAB04_CUDA_KERNEL
// The serial kernel (the project's own); the parallel reduction is graded in graded.cpp.
const auto kSerial = speedlabs::cuda::launch_sum_squares_one_thread;

void require_kernel_gpu() {
  const auto gpus = speedlabs::cuda::find_gpus();
  if (gpus.count == 0) GTEST_SKIP() << gpus.reason;
}

TEST(Lab04KernelGpu, SmallExactCases) {
  require_kernel_gpu();
  if (testing::Test::IsSkipped()) return;
  // Integers below 2^53 are exact in double, so every addition order gives exactly 14 and 9.
  const double x[] = {1.0, -2.0, 3.0};
  EXPECT_EQ(speedlabs::cuda::sum_squares(x, 3, kSerial, 0, 1).sum, 14.0);
  EXPECT_EQ(speedlabs::cuda::sum_squares(x + 2, 1, kSerial, 0, 1).sum, 9.0);
}

TEST(Lab04KernelGpu, MatchesTheCpuOnAnOddSize) {
  require_kernel_gpu();
  if (testing::Test::IsSkipped()) return;
  // 1,000,003 is not a multiple of the block size nor of the grid, so the tails are exercised.
  const int64_t n = 1'000'003;
  torch::manual_seed(1);
  const torch::Tensor x = torch::randn({n}, torch::kFloat64);
  const double* data = x.data_ptr<double>();
  double cpu = 0;
  for (int64_t i = 0; i < n; ++i) cpu += data[i] * data[i];
  const auto run = speedlabs::cuda::sum_squares(data, n, kSerial, 1, 2);
  EXPECT_EQ(run.times_ms.size(), 2u);
  // Positive terms in different orders: within n*eps = 1.1e-10 relative; 1e-9 leaves a margin.
  EXPECT_NEAR(run.sum, cpu, 1e-9 * cpu);
}
#endif

class Lab04TorchGpu : public testing::Test {
 protected:
  void SetUp() override {
    if (!speedlabs::cuda_available()) GTEST_SKIP() << "libtorch sees no CUDA GPU";
  }
  const c10::Device cuda_{c10::kCUDA, 0};
};

TEST_F(Lab04TorchGpu, MeasureWaitsForTheGpu) {
  const auto a = torch::randn({4096, 4096}, torch::TensorOptions().device(cuda_));
  torch::Tensor c;
  const auto work = [&] { c = torch::mm(a, a); };  // ~0.1 TFLOP: far longer on the GPU than to queue
  lab04::TorchDevice device(cuda_);
  const auto measured = lab04::measure(work, device, {2, 5});
  const auto events = speedlabs::time_ms(work, cuda_, {2, 5});
  // The host window of a synchronized measurement encloses the GPU's own event window; 0.9 absorbs
  // clock granularity. An unsynchronized measure() would report only the launch, far below it.
  EXPECT_GE(measured.median_ms, 0.9 * events.median_ms);
}

TEST_F(Lab04TorchGpu, GpuObservationsHold) {
  lab04::Config config = lab04::quick_config();
  speedlabs::Report report("04_measure", speedlabs::describe(cuda_));
  lab04::run(config, cuda_, report);
  EXPECT_EQ(report.at("gpu_unsynced_time_is_misleading").verdict, speedlabs::Verdict::holds);
  EXPECT_NE(report.at("gpu_bf16_vs_fp32").verdict, speedlabs::Verdict::not_applicable);
  EXPECT_TRUE(report.at("first_call_slower_than_median").measured.contains("cuda:0"));
#ifdef SPEEDLABS_LAB04_CUDA_KERNEL
  EXPECT_EQ(report.at("gpu_kernel_matches_cpu").verdict, speedlabs::Verdict::holds);
  // A ratio is asserted only because it is huge (one thread vs a whole GPU, typically 1000x and more).
  EXPECT_EQ(report.at("gpu_parallel_kernel_vs_serial").verdict, speedlabs::Verdict::holds);
#endif
  EXPECT_EQ(report.exit_code(), 0);
}

}  // namespace
