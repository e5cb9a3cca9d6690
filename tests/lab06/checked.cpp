// Lab 06, checked outside the student's process (tests/support/checked.h): three AdamW steps, multi-tensor and
// fused, over parameters, gradients and hyperparameters the grader's seed draws; where the grader has a CUDA GPU,
// a small training step captured in a CUDA graph and replayed on batches the seed draws.
#include <cmath>
#include <functional>

#include "common/device.h"
#include "exercise.h"
#include "tests/lab06/graph_step.h"
#include "tests/support/checked.h"
#ifdef SPEEDLABS_TORCH_HAS_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace speedlabs::checked {

namespace {

// Up to four float32 parameters of random shapes with zero state; three steps, each with fresh gradients.
// The step counts are float32 0-dim tensors on the CPU. @p step runs one update.
Outputs three_steps(at::Generator& generator, const std::function<void(lab06::AdamWTensors&, double)>& step) {
  lab06::AdamWTensors t;
  const int64_t count = draw_int(generator, 1, 4);
  for (int64_t i = 0; i < count; ++i) {
    const auto shape = std::vector<int64_t>{draw_int(generator, 1, 64), draw_int(generator, 1, 8)};
    t.params.push_back(torch::randn(shape, generator, torch::kFloat));
    t.grads.push_back(torch::empty(shape, torch::kFloat));
    t.exp_avgs.push_back(torch::zeros(shape, torch::kFloat));
    t.exp_avg_sqs.push_back(torch::zeros(shape, torch::kFloat));
    t.steps.push_back(torch::zeros({}, torch::kFloat));
  }
  const double lr = std::ldexp(1.0, -static_cast<int>(draw_int(generator, 4, 12)));
  for (int s = 0; s < 3; ++s) {
    for (auto& grad : t.grads) grad.copy_(torch::randn(grad.sizes(), generator, torch::kFloat));
    step(t, lr);
  }
  Outputs outputs;
  for (int64_t i = 0; i < count; ++i) {
    const auto n = std::to_string(i);
    outputs.insert(outputs.end(), {{"param_" + n, t.params[i]},
                                   {"exp_avg_" + n, t.exp_avgs[i]},
                                   {"exp_avg_sq_" + n, t.exp_avg_sqs[i]},
                                   {"step_" + n, t.steps[i]}});
  }
  return outputs;
}

lab06::AdamWHyperparameters draw_hyper(at::Generator& generator) {
  lab06::AdamWHyperparameters hyper;
  hyper.weight_decay = draw_int(generator, 0, 1) ? 0.1 : 0.0;
  hyper.beta2 = draw_int(generator, 0, 1) ? 0.95 : 0.999;
  return hyper;
}

// The same formula in float32 in two op orders: each within a few roundings (1e-7 relative) of the exact
// value; a parameter moves by about lr per step, so 1e-5 relative and 1e-7 absolute leave room and still
// catch a missing bias correction, a wrong decay or a lost step (errors of lr / 10 and more).
constexpr Tolerance kAdamWOrders{1e-5, 1e-7};

#ifdef SPEEDLABS_TORCH_HAS_CUDA
// An MLP of a drawn width and weights, 1-2 eager steps on a side stream, then one step captured with
// capture_train_step and replayed on each further batch (4-8 steps in all, batches of 8-128 drawn on the CPU):
// whether the capture itself moved the weights, each step's loss, and the weights at the end.
Outputs graphed_steps(at::Generator& generator) {
  const int64_t hidden = draw_int(generator, 8, 64), batch = draw_int(generator, 8, 128);
  const int64_t steps = draw_int(generator, 4, 8), eager = draw_int(generator, 1, 2);
  const auto seed = static_cast<uint64_t>(draw_int(generator, 0, 1 << 30));
  const double lr = std::ldexp(1.0, -static_cast<int>(draw_int(generator, 2, 6)));
  std::vector<torch::Tensor> xs, ys;
  for (int64_t i = 0; i < steps; ++i) {
    xs.push_back(torch::randn({batch, 16}, generator, torch::kFloat).to(lab06_test::kCuda));
    ys.push_back(torch::randn({batch, 1}, generator, torch::kFloat).to(lab06_test::kCuda));
  }
  auto mlp = lab06_test::small_mlp(seed, hidden);
  torch::optim::SGD optimizer(mlp->parameters(), torch::optim::SGDOptions(lr));
  std::vector<torch::Tensor> losses;
  int64_t moved_by_capture = 0;
  speedlabs::synchronize(lab06_test::kCuda);
  {
    c10::cuda::CUDAStreamGuard side_stream(c10::cuda::getStreamFromPool(false, 0));
    auto static_x = xs[0].clone(), static_y = ys[0].clone();
    const auto step = [&] { return lab06_test::sgd_step(mlp, optimizer, static_x, static_y); };
    for (int64_t i = 0; i < eager; ++i) {
      static_x.copy_(xs[i]);
      static_y.copy_(ys[i]);
      losses.push_back(step().clone());
    }
    const auto before = joined(mlp->parameters());
    at::cuda::CUDAGraph graph;
    static_x.copy_(xs[eager]);
    static_y.copy_(ys[eager]);
    const auto static_loss = lab06::capture_train_step(graph, step, optimizer);
    moved_by_capture = torch::equal(joined(mlp->parameters()), before) ? 0 : 1;
    for (int64_t i = eager; i < steps; ++i) {
      static_x.copy_(xs[i]);
      static_y.copy_(ys[i]);
      graph.replay();
      losses.push_back(static_loss.clone());
    }
  }
  speedlabs::synchronize(lab06_test::kCuda);
  return {{"weights_moved_by_the_capture", torch::tensor({moved_by_capture}, torch::kLong)},
          {"losses", torch::stack(losses).to(torch::kCPU)},
          {"weights_after_the_replays", joined(mlp->parameters()).to(torch::kCPU)}};
}
#endif

}  // namespace

std::vector<Exercise> exercises() {
  std::vector<Exercise> checked = {
      {"foreach_adamw_update",
       [](at::Generator& generator) {
         const auto hyper = draw_hyper(generator);
         return three_steps(generator,
                            [&](lab06::AdamWTensors& t, double lr) { lab06::foreach_adamw_update(t, lr, hyper); });
       },
       kAdamWOrders},
      {"fused_adamw_update",
       [](at::Generator& generator) {
         const auto hyper = draw_hyper(generator);
         return three_steps(generator, [&](lab06::AdamWTensors& t, double lr) {
           lab06::fused_adamw_update(t, torch::tensor(static_cast<float>(lr)), hyper);
         });
       },
       kAdamWOrders},
  };
#ifdef SPEEDLABS_TORCH_HAS_CUDA
  // Listed only where a GPU is: elsewhere its graded tests are skipped and it is worth nothing. The same kernels
  // on the same inputs, replayed or run by the reference's own capture: equal up to float32 rounding, 1e-5
  // relative as the graded test allows; a replay that missed the optimizer step or reread a stale input is off
  // by whole percents.
  if (speedlabs::cuda_available()) checked.push_back({"capture_train_step", graphed_steps, Tolerance{1e-5, 1e-6}});
#endif
  return checked;
}

}  // namespace speedlabs::checked
