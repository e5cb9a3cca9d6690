// Lab 06, checked outside the student's process (tests/support/checked.h): three AdamW steps, multi-tensor and
// fused, over parameters, gradients and hyperparameters the grader's seed draws.
#include <cmath>
#include <functional>

#include "exercise.h"
#include "tests/support/checked.h"

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

}  // namespace

std::vector<Exercise> exercises() {
  return {
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
}

}  // namespace speedlabs::checked
