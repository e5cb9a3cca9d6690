// Lab 12, checked outside the student's process (tests/support/checked.h): one chunk's fused head and loss,
// forward and backward, in float32 on sizes, scales and targets the grader's seed draws.
#include "tests/support/checked.h"
#include "exercise.h"

namespace speedlabs::checked {

namespace {

struct ChunkInputs {
  torch::Tensor hidden, weight, targets;  // (rows, C) float32, (V, C) float32, (rows,) int64
};

ChunkInputs draw_chunk(at::Generator& generator) {
  const int64_t rows = draw_int(generator, 1, 64), width = draw_int(generator, 8, 64);
  const int64_t vocabulary = draw_int(generator, 2, 3000);
  // Logits of size ~3 and, one time in two, ~300 (exp of them overflows without each row's maximum).
  const double scale = draw_int(generator, 0, 1) ? 300.0 : 3.0;
  auto hidden = torch::randn({rows, width}, generator, torch::kFloat);
  auto weight = torch::randn({vocabulary, width}, generator, torch::kFloat) * (scale / std::sqrt(double(width)));
  auto targets = torch::randint(0, vocabulary, {rows}, generator, torch::kLong);
  return {hidden, weight, targets};
}

}  // namespace

std::vector<Exercise> exercises() {
  return {
      {"chunk_forward",
       [](at::Generator& generator) {
         const auto in = draw_chunk(generator);
         const auto result = lab12::chunk_forward(in.hidden, in.weight, in.targets);
         return Outputs{{"loss_sum", result.loss_sum}, {"lse", result.lse}};
       },
       // float32 log-sum-exps over up to 3000 logits in two orders: each about 1e-6 relative from the exact
       // value, so 2e-5 apart at most; a missing maximum, a wrong target or a lost row errs far more.
       Tolerance{2e-5, 1e-5}},
      {"chunk_backward",
       [](at::Generator& generator) {
         const auto in = draw_chunk(generator);
         // The saved lse as the forward computes it, in float64 and rounded (the student's forward is not used).
         const auto lse = torch::logsumexp(in.hidden.to(torch::kDouble).matmul(in.weight.to(torch::kDouble).t()), -1)
                              .to(torch::kFloat);
         const auto grad_scale = torch::rand({}, generator, torch::kFloat) + 0.5;
         auto grad_weight = torch::randn(in.weight.sizes(), generator, torch::kFloat) * 0.1;  // kept, then added to
         auto grad_hidden = lab12::chunk_backward(in.hidden, in.weight, in.targets, lse, grad_scale, grad_weight);
         return Outputs{{"grad_hidden", grad_hidden}, {"grad_weight_accumulated", grad_weight}};
       },
       // Gradients of size up to ~10 (hidden ~1 times softmax differences, summed over up to 64 rows): float32
       // products in two orders differ by a few roundings of the largest term, under 1e-4 absolute; 1e-4
       // relative beside it. A missing scale, a missing "- 1" at the target or no accumulation (0.1 lost) errs by
       // far more.
       Tolerance{1e-4, 1e-4}},
  };
}

}  // namespace speedlabs::checked
