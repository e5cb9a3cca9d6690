// Lab 09, checked outside the student's process (tests/support/checked.h): the online softmax and the tiled
// attention forward on shapes, tiles and scales the grader's seed draws.
#include <limits>

#include "exercise.h"
#include "tests/lab09/speed_rules.h"
#include "tests/support/checked.h"

namespace speedlabs::checked {

namespace {

// Two float32 computations in different orders: each within about 1e-6 relative of the exact result (the
// graded tests measure it against float64), so 2e-5 apart at most; probabilities that underflow to 0 in one
// order may be tiny in another (1e-9 absolute). A missing rescale or a wrong scale errs by 1e-2 or more.
constexpr Tolerance kFloat32Orders{2e-5, 1e-9};
// The attention output averages values of size ~1: 1e-6 absolute beside 2e-5 relative for outputs near 0.
constexpr Tolerance kAttentionOrders{2e-5, 1e-6};
// At the speed size, T = 1024 keys: sums 10x longer than the checked shapes', so 2e-5 absolute (the graded speed
// test's rule, tests/lab09/graded.cpp) for outputs near 0; a wrong or empty answer is off by 1e-2 or more.
constexpr Tolerance kSpeedOrders{1e-5, 2e-5};

}  // namespace

std::vector<Exercise> exercises() {
  return {
      {"online_softmax",
       [](at::Generator& generator) {
         // Rows of 1..300 columns at scales up to 1000 (exp of them overflows without the running maximum),
         // a tenth of the entries masked to -inf (never a whole row: its first column stays), any block.
         const int64_t rows = draw_int(generator, 1, 64), columns = draw_int(generator, 1, 300);
         const double scale = draw_int(generator, 0, 1) ? 1000.0 : 3.0;
         auto logits = torch::randn({rows, columns}, generator, torch::kFloat) * scale;
         auto masked = torch::rand({rows, columns}, generator, torch::kFloat).lt(0.1);
         masked.select(1, 0).fill_(false);
         logits.masked_fill_(masked, -std::numeric_limits<float>::infinity());
         const int64_t block = draw_int(generator, 1, columns + 3);
         return Outputs{{"probabilities", lab09::online_softmax(logits, block)}};
       },
       kFloat32Orders},
      {"tiled_attention_forward",
       [](at::Generator& generator) {
         const auto qkv = draw_attention_inputs(generator, 3);
         const int64_t length = qkv[0].size(2);
         const int64_t q_tile = draw_int(generator, 1, length + 3), kv_tile = draw_int(generator, 1, length + 3);
         const auto result = lab09::tiled_attention_forward(qkv[0], qkv[1], qkv[2], q_tile, kv_tile);
         return Outputs{{"out", result.out}, {"lse", result.lse}};
       },
       kAttentionOrders},
  };
}

// Speed, timed outside (./lab grade): the tiled forward (tiles 256 x 256, as the lab's default run) against
// libtorch's SDPA on GPT-2 small's 12 heads of 64 at T = 1024, fresh q, k and v for every call, 8 calls a process,
// each side on one CPU. Points by the exercise's rule in tests/lab09/points.tsv, as the graded test in
// tests/lab09/graded.cpp in the student's own process.
std::vector<Timed> timed() {
  constexpr auto rule = lab09::speed_rules::tiled_attention_forward_speed;
  return {{"tiled_attention_forward_speed", 8, rule.full, rule.zero,
           [](at::Generator& generator, Side side) {
             torch::NoGradGuard no_grad;
             std::vector<torch::Tensor> qkv;
             for (int i = 0; i < 3; ++i) qkv.push_back(torch::randn({1, 12, 1024, 64}, generator, torch::kFloat));
             if (side == Side::inputs_only) return Outputs{};
             const auto out = side == Side::exercise
                                  ? lab09::tiled_attention_forward(qkv[0], qkv[1], qkv[2], 256, 256).out
                                  : at::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], {}, 0.0, true);
             return Outputs{{"out", out}};
           },
           kSpeedOrders}};
}

}  // namespace speedlabs::checked
