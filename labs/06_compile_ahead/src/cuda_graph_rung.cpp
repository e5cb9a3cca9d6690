// The cuda_graph rung, in the order of NVIDIA's simpleCudaGraphs sample: warm up eagerly, capture one
// step, then replay it. Its own file because only a CUDA libtorch has these APIs.
#include "rung_runner.h"

#include "common/device.h"
#include "common/memory.h"
#include "common/process.h"
#include "common/timer.h"
#include "labs/05_gpt2/exercise.h"
#include "optimizers.h"

#ifdef SPEEDLABS_TORCH_HAS_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace lab06 {

namespace {
// Steps run eagerly (on the side stream) before capturing: cuBLAS handles, autocast caches and the
// optimizer's lazily built lists exist before the capture starts.
constexpr int kGraphEagerSteps = 3;
}  // namespace

RungResult RungRunner::cuda_graph(const Shape& shape) const {
  RungResult result;
  result.name = to_string(Rung::cuda_graph);
  result.shape = shape;
#ifdef SPEEDLABS_TORCH_HAS_CUDA
  if (!device.is_cuda()) {
    result.reason = "CUDA graphs need a CUDA GPU; this run is on " + device.str();
    return result;
  }
  if (total_steps() <= kGraphEagerSteps) {
    result.reason = "needs more than " + std::to_string(kGraphEagerSteps) + " steps (eager ones before the capture)";
    return result;
  }
  speedlabs::reset_peak_memory(device);
  auto model = build_model(Rung::cuda_graph);
  FusedAdamW optimizer(model->parameters(), lr);
  auto losses = torch::zeros({total_steps()}, torch::TensorOptions().device(device));

  // 1. A side stream: a graph is never captured on the legacy default stream. The timer's events go on
  //    the current stream, so the whole rung runs with the side stream current.
  speedlabs::synchronize(device);
  c10::cuda::CUDAStreamGuard side_stream(c10::cuda::getStreamFromPool(false, device.index()));
  // 2. Fixed input addresses: the graph reads its batch from them, each step copies its batch there.
  auto static_x = batches.x[0].clone();
  auto static_y = batches.y[0].clone();
  const auto precision = rung_precision(Rung::cuda_graph);
  const auto step = [&] { return lab05::train_step(model, optimizer, static_x, static_y, precision); };
  const auto load_batch = [&](int i) {
    static_x.copy_(batches.x[i]);
    static_y.copy_(batches.y[i]);
  };
  std::vector<double> times;
  at::cuda::CUDAGraph graph;
  torch::Tensor static_loss;
  try {
    // 3. Warm-up: eager steps.
    for (int i = 0; i < kGraphEagerSteps; ++i) {
      times.push_back(speedlabs::time_once_ms(
          [&] {
            load_batch(i);
            losses[i].copy_(step());
          },
          device));
    }
    // 4. Capture, timed with the first replay: every kernel of forward, backward and the fused AdamW step,
    //    with the addresses it touches, is recorded (not run) as one graph.
    times.push_back(speedlabs::time_once_ms(
        [&] {
          load_batch(kGraphEagerSteps);
          static_loss = capture_train_step(graph, step, optimizer);
          graph.replay();
          losses[kGraphEagerSteps].copy_(static_loss);
        },
        device));
    // 5. Replays: one launch per training step.
    for (int i = kGraphEagerSteps + 1; i < total_steps(); ++i) {
      speedlabs::stop_if_asked("during the " + result.name + " rung");
      times.push_back(speedlabs::time_once_ms(
          [&] {
            load_batch(i);
            graph.replay();
            losses[i].copy_(static_loss);
          },
          device));
    }
  } catch (const c10::Error& error) {
    result.reason = std::string("the capture or replay failed: ") + error.what_without_backtrace();
    return result;
  }
  summarize_times(Rung::cuda_graph, result, times, kGraphEagerSteps);
  result.peak_bytes = speedlabs::peak_memory_bytes(device);
  const auto host_losses = losses.cpu();
  result.losses = std::vector<double>(host_losses.data_ptr<float>(), host_losses.data_ptr<float>() + total_steps());
  result.detail = std::to_string(kGraphEagerSteps) + " eager steps, capture, then replays";
  result.ran = true;
#else
  result.reason = "this libtorch was built without CUDA (CUDA graphs need a CUDA libtorch and GPU)";
#endif
  return result;
}

}  // namespace lab06
