// Lab 03, checked outside the student's process (tests/support/checked.h): the unscaling of gradients with
// its inf/NaN check, the loss scale's update, the GradScaler around one or two optimizers, and whole
// mixed-precision steps, on gradients, scales, states, layers and batches the grader's seed draws.
#include <ATen/autocast_mode.h>

#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>

#include "exercise.h"
#include "tests/support/checked.h"

namespace speedlabs::checked {

namespace {

// A power-of-two scale: unscaling is exact in float32 whether it multiplies by 1/scale or divides by it, and
// the scale's update multiplies by powers of two: every output has one right value.
constexpr Tolerance kExact{};

double power_of_two(int64_t exponent) { return std::ldexp(1.0, static_cast<int>(exponent)); }

// One element of @p t, drawn, becomes an inf or a NaN.
void poison_one(const torch::Tensor& t, at::Generator& generator) {
  const bool nan = draw_int(generator, 0, 1) == 1;
  t.view(-1)[draw_int(generator, 0, t.numel() - 1)] =
      nan ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
}

// The gradients of @p parameters, in their order.
std::vector<torch::Tensor> gradients_of(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> gradients;
  for (const auto& p : parameters) gradients.push_back(p.grad());
  return gradients;
}

// 6 to 12 iterations of one scaler around two or three SGD optimizers (one scaler serves several; one alone is
// the graded tests' case) of 1 to 3 drawn parameters each. The loss is sum(p . d) over the parameters, so each
// gradient is its drawn d (an inf or a NaN in one optimizer's, one iteration in two); each optimizer steps
// through unscale_() first one time in two. Every number stays a power of two times a float32 (scales,
// factors, rates), so every output has one right value.
Outputs grad_scaler_iterations(at::Generator& generator) {
  lab03::GradScalerOptions options;
  options.init_scale = power_of_two(draw_int(generator, 0, 20));
  options.growth_factor = power_of_two(draw_int(generator, 1, 2));
  options.backoff_factor = power_of_two(-draw_int(generator, 1, 2));
  options.growth_interval = draw_int(generator, 1, 4);
  options.enabled = draw_int(generator, 0, 7) != 0;  // one time in eight disabled: every method a pass-through
  lab03::GradScaler scaler(options);
  std::vector<std::vector<torch::Tensor>> groups(static_cast<size_t>(draw_int(generator, 2, 3)));
  std::vector<std::unique_ptr<torch::optim::SGD>> optimizers;
  for (auto& group : groups) {
    for (int64_t i = draw_int(generator, 1, 3); i > 0; --i) {
      group.push_back(torch::randn({draw_int(generator, 1, 20)}, generator, torch::kFloat).requires_grad_());
    }
    const double rate = power_of_two(-draw_int(generator, 1, 5));
    optimizers.push_back(std::make_unique<torch::optim::SGD>(group, torch::optim::SGDOptions(rate)));
  }
  std::vector<float> scaled_losses;
  std::vector<double> scales;
  std::vector<int64_t> stepped, trackers;
  for (int64_t iteration = draw_int(generator, 6, 12); iteration > 0; --iteration) {
    for (auto& optimizer : optimizers) optimizer->zero_grad();
    const bool poisoned = draw_int(generator, 0, 1) == 0;
    const size_t poisoned_group = static_cast<size_t>(draw_int(generator, 0, static_cast<int64_t>(groups.size()) - 1));
    auto loss = torch::zeros({});
    for (size_t g = 0; g < groups.size(); ++g) {
      for (const auto& p : groups[g]) {
        const auto direction =
            torch::randn(p.sizes(), generator, torch::kFloat) * power_of_two(draw_int(generator, -4, 4));
        if (poisoned && g == poisoned_group && &p == &groups[g].front()) poison_one(direction, generator);
        loss = loss + (p * direction).sum();
      }
    }
    const auto scaled = scaler.scale(loss);
    scaled_losses.push_back(scaled.item<float>());
    scaled.backward();
    for (auto& optimizer : optimizers) {
      if (draw_int(generator, 0, 1) == 1) scaler.unscale_(*optimizer);  // else step() unscales
      stepped.push_back(scaler.step(*optimizer) ? 1 : 0);
    }
    scaler.update();
    scales.push_back(scaler.get_scale());
    trackers.push_back(scaler.get_growth_tracker());
  }
  // With no unscale_() or step() since the last update(), update() refuses (std::logic_error); disabled, it
  // does nothing. 1: refused as documented, 0: returned, 2: threw something else.
  int64_t update_again = 0;
  try {
    scaler.update();
  } catch (const std::logic_error&) {
    update_again = 1;
  } catch (const std::exception&) {
    update_again = 2;
  }
  Outputs outputs{{"scaled_losses", torch::tensor(scaled_losses)},
                  {"stepped", torch::tensor(stepped, torch::kLong)},
                  {"scales", torch::tensor(scales, torch::kFloat64)},
                  {"growth_trackers", torch::tensor(trackers, torch::kLong)},
                  {"update_without_a_step", torch::tensor(update_again, torch::kLong)}};
  for (size_t g = 0; g < groups.size(); ++g) {
    outputs.emplace_back("parameters_" + std::to_string(g), joined(groups[g]));
    outputs.emplace_back("last_gradients_" + std::to_string(g), joined(gradients_of(groups[g])));
  }
  return outputs;
}

// 1 to 6 steps of a drawn linear layer (in 1-16, out 1-8, 1-32 rows) on drawn batches, its loss the mean
// squared error: three times in four float16 with an enabled scaler whose first scale, 2^10 to 2^28, can
// overflow float16's gradients (the step skipped, the scale backed off), an inf in the batch one step in three;
// else bfloat16 with a disabled scaler (the plain autocast step).
Outputs mixed_precision_steps(at::Generator& generator) {
  const int64_t in = draw_int(generator, 1, 16), out = draw_int(generator, 1, 8), rows = draw_int(generator, 1, 32);
  const auto weight = (torch::randn({out, in}, generator, torch::kFloat) * 0.5).requires_grad_();
  const auto bias = torch::randn({out}, generator, torch::kFloat).requires_grad_();
  torch::optim::SGD optimizer({weight, bias}, torch::optim::SGDOptions(power_of_two(-draw_int(generator, 2, 6))));
  const bool half = draw_int(generator, 0, 3) != 0;
  lab03::GradScalerOptions options;
  options.init_scale = power_of_two(draw_int(generator, 10, 28));
  options.growth_interval = draw_int(generator, 1, 3);
  options.enabled = half;
  lab03::GradScaler scaler(options);
  std::vector<double> losses, scales;
  std::vector<int64_t> stepped, forward_dtypes;
  for (int64_t step = draw_int(generator, 1, 6); step > 0; --step) {
    const auto x = torch::randn({rows, in}, generator, torch::kFloat);
    const auto target = torch::randn({rows, out}, generator, torch::kFloat);
    if (half && draw_int(generator, 0, 2) == 0) poison_one(x, generator);
    int64_t forward_dtype = -1;  // what the layer's output was inside the step: autocast's dtype, if it was on
    const auto result = lab03::mixed_precision_step(
        [&] {
          const auto y = torch::nn::functional::linear(x, weight, bias);
          forward_dtype = static_cast<int64_t>(y.scalar_type());
          return (y.to(torch::kFloat) - target).pow(2).mean();
        },
        optimizer, scaler, c10::kCPU, half ? c10::kHalf : c10::kBFloat16);
    losses.push_back(result.loss);
    stepped.push_back(result.stepped ? 1 : 0);
    scales.push_back(scaler.get_scale());
    forward_dtypes.push_back(forward_dtype);
  }
  const bool autocast_left_on = at::autocast::is_autocast_enabled(c10::kCPU);
  return Outputs{{"losses", torch::tensor(losses, torch::kFloat64)},
                 {"stepped", torch::tensor(stepped, torch::kLong)},
                 {"scales", torch::tensor(scales, torch::kFloat64)},
                 {"forward_dtypes", torch::tensor(forward_dtypes, torch::kLong)},
                 {"autocast_on_after", torch::tensor(int64_t{autocast_left_on}, torch::kLong)},
                 {"weight", weight.detach()},
                 {"bias", bias.detach()}};
}

}  // namespace

std::vector<Exercise> exercises() {
  return {
      {"unscale_and_check",
       [](at::Generator& generator) {
         // Up to five gradients of random shapes, scaled by 2^k; one time in three a gradient holds an inf or a NaN.
         const int64_t count = draw_int(generator, 0, 5), exponent = draw_int(generator, 0, 24);
         std::vector<torch::Tensor> grads;
         for (int64_t i = 0; i < count; ++i) {
           auto grad =
               torch::randn({draw_int(generator, 1, 300), draw_int(generator, 1, 4)}, generator, torch::kFloat) *
               std::ldexp(1.0, static_cast<int>(exponent));
           const int64_t poison = draw_int(generator, 0, 5);
           if (poison < 2)
             grad.view(-1)[draw_int(generator, 0, grad.numel() - 1)] =
                 poison ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
           grads.push_back(grad);
         }
         const auto found_inf = lab03::unscale_and_check(grads, std::ldexp(1.0, -static_cast<int>(exponent)));
         Outputs outputs{{"found_inf", found_inf}};
         for (size_t i = 0; i < grads.size(); ++i) outputs.emplace_back("grad_" + std::to_string(i), grads[i]);
         return outputs;
       },
       kExact},
      {"next_scale_state",
       [](at::Generator& generator) {
         // 500 updates from random states: scales from 2^-20 to 2^127 (where growing leaves float32), trackers
         // just below, at and past the interval's end, with and without an inf.
         std::vector<double> scales;
         std::vector<int64_t> trackers;
         for (int i = 0; i < 500; ++i) {
           lab03::ScaleRule rule;
           rule.growth_interval = draw_int(generator, 1, 6);
           rule.growth_factor = std::ldexp(1.0, static_cast<int>(draw_int(generator, 1, 3)));
           rule.backoff_factor = std::ldexp(1.0, -static_cast<int>(draw_int(generator, 1, 3)));
           lab03::ScaleState state;
           state.scale = std::ldexp(1.0, static_cast<int>(draw_int(generator, -20, 127)));
           state.growth_tracker = draw_int(generator, 0, rule.growth_interval - 1);
           const auto next = lab03::next_scale_state(state, draw_int(generator, 0, 3) == 0, rule);
           scales.push_back(next.scale);
           trackers.push_back(next.growth_tracker);
         }
         return Outputs{{"scales", torch::tensor(scales, torch::kFloat64)},
                        {"growth_trackers", torch::tensor(trackers, torch::kLong)}};
       },
       kExact},
      {"GradScaler", grad_scaler_iterations, kExact},
      // Both processes run the same libtorch kernels on the same machine, so the same calls give the same bits;
      // the tolerance leaves room for an equivalent order of the step's float32 arithmetic (an ulp or two of an
      // update). A forward outside autocast (float32 output: forward_dtypes), a backward of the unscaled loss, a
      // step on an inf gradient or a scale never updated errs by far more, most of them exactly.
      {"mixed_precision_step", mixed_precision_steps, Tolerance{1e-5, 1e-6}},
  };
}

}  // namespace speedlabs::checked
