// Lab 06 on a CUDA GPU: the multi-tensor optimizers on the device, the fused step inside a CUDA graph
// (replays read the device learning rate), and the whole ladder up to the CUDA-graph rung on the tiny
// model. Every test skips where there is no CUDA GPU.
#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <string>
#include <vector>

#include "adamw_parity.h"
#include "common/build_paths.h"
#include "common/device.h"
#include "common/observations.h"
#include "labs/06_compile_ahead/src/experiment.h"
#include "labs/06_compile_ahead/src/optimizers.h"
#include "tests/support/expect.h"

#ifdef SPEEDLABS_TORCH_HAS_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace {

using speedlabs::Verdict;

#define SKIP_WITHOUT_CUDA() \
  if (!speedlabs::cuda_available()) GTEST_SKIP() << "no CUDA GPU here"

const c10::Device kCuda(c10::kCUDA, 0);

std::vector<torch::Tensor> leaves(const std::vector<torch::Tensor>& values) {
  std::vector<torch::Tensor> params;
  for (const auto& v : values) params.push_back(v.clone().requires_grad_(true));
  return params;
}

template <typename Optimizer>
class Lab06GpuOptimizer : public ::testing::Test {};
using MultiTensorOptimizers = ::testing::Types<lab06::ForeachAdamW, lab06::FusedAdamW>;
TYPED_TEST_SUITE(Lab06GpuOptimizer, MultiTensorOptimizers);

// On the GPU the foreach ops and the fused kernel are real multi-tensor kernels (the CPU runs loops):
// they must still do libtorch's per-tensor AdamW.
TYPED_TEST(Lab06GpuOptimizer, MatchesTorchAdamWOnTheDevice) {
  SKIP_WITHOUT_CUDA();
  lab06_test::expect_matches_torch_adamw<TypeParam>(kCuda, {{300, 7}, {7}, {3, 4, 2}});
}

#ifdef SPEEDLABS_TORCH_HAS_CUDA
// The fused step captured once and replayed is the fused step run eagerly, replay for replay, and a
// learning rate written into the device tensor between replays takes effect: the ladder's top rung
// relies on both.
TEST(Lab06GpuGraph, ReplayedFusedStepEqualsEagerStepsAndReadsTheDeviceLr) {
  SKIP_WITHOUT_CUDA();
  torch::manual_seed(0);
  const auto options = torch::TensorOptions().device(kCuda);
  const std::vector<torch::Tensor> initial{torch::randn({64, 32}, options), torch::randn({32}, options)};
  const std::vector<torch::Tensor> grads{torch::randn({64, 32}, options), torch::randn({32}, options)};
  auto graphed = leaves(initial), eager = leaves(initial);
  for (size_t i = 0; i < initial.size(); ++i) {
    graphed[i].mutable_grad() = grads[i].clone();  // fixed addresses: the graph reads these every replay
    eager[i].mutable_grad() = grads[i].clone();
  }
  lab06::FusedAdamW graphed_optimizer(graphed, 1e-2), eager_optimizer(eager, 1e-2);

  speedlabs::synchronize(kCuda);
  at::cuda::CUDAGraph graph;
  {
    c10::cuda::CUDAStreamGuard side_stream(c10::cuda::getStreamFromPool(false, 0));
    graphed_optimizer.step();  // one eager step on the capture stream first, as the ladder does
    graph.capture_begin();
    graphed_optimizer.step();  // recorded, not run
    graph.capture_end();
    for (int i = 0; i < 3; ++i) graph.replay();
    graphed_optimizer.set_lr(1e-3);
    for (int i = 0; i < 2; ++i) graph.replay();
  }
  speedlabs::synchronize(kCuda);
  for (int i = 0; i < 4; ++i) eager_optimizer.step();
  eager_optimizer.set_lr(1e-3);
  for (int i = 0; i < 2; ++i) eager_optimizer.step();

  for (size_t i = 0; i < initial.size(); ++i) {
    // The same kernel on the same inputs: equal up to float32 rounding. A replay that read a stale
    // learning rate or step count would be off by a whole update (~1e-3).
    EXPECT_TRUE(speedlabs::testing::tensors_close(graphed[i], eager[i], 1e-7, 1e-6,
                                                  "param " + std::to_string(i) + " after the replays vs eager steps"));
    EXPECT_EQ(graphed_optimizer.step_counts()[i].item<float>(), 6.0f);
  }
}
#endif

// The tiny model up every rung, the CUDA graph included, with the Python eager peers where a Python
// with a CUDA torch is configured.
TEST(Lab06GpuLadder, ClimbsToTheCudaGraphRungAndTracksFp32) {
  SKIP_WITHOUT_CUDA();
  auto config = lab06::quick_config();
  config.python = speedlabs::configured_python();
  speedlabs::Report report("06_compile_ahead", "cuda");
  const auto result = lab06::run(config, kCuda, report);
  for (const char* rung : {"fp32", "tf32", "bf16", "sdpa", "vocab50304", "fused_adamw", "cuda_graph"}) {
    EXPECT_EQ(report.at(std::string("rung_") + rung + "_2x32").verdict, Verdict::holds) << rung;
  }
  EXPECT_EQ(report.at("initial_losses_2x32").verdict, Verdict::holds);
  EXPECT_EQ(report.at("losses_track_fp32_2x32").verdict, Verdict::holds);
  for (const auto& r : result.rungs) {
    EXPECT_TRUE(r.peak_bytes.has_value()) << r.name;  // the CUDA caching allocator keeps a peak
  }
  if (!speedlabs::configured_python().empty()) {
    EXPECT_EQ(report.at("python_eager_vs_cpp_fp32_2x32").verdict, Verdict::holds);
  }
  EXPECT_EQ(report.exit_code(), 0);
}

}  // namespace
