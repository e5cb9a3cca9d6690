// Lab 03, checked outside the student's process (tests/support/checked.h): the unscaling of gradients with
// its inf/NaN check, and the loss scale's update, on gradients, scales and states the grader's seed draws.
#include <cmath>
#include <limits>

#include "exercise.h"
#include "tests/support/checked.h"

namespace speedlabs::checked {

namespace {

// A power-of-two scale: unscaling is exact in float32 whether it multiplies by 1/scale or divides by it, and
// the scale's update multiplies by powers of two: every output has one right value.
constexpr Tolerance kExact{};

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
  };
}

}  // namespace speedlabs::checked
