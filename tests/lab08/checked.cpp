// Lab 08, checked outside the student's process (tests/support/checked.h): a checkpointed block's output and
// the gradients its recomputation gives, for a block (linear, GELU, dropout, linear) and input the grader's seed
// draws.
#include <cmath>

#include "exercise.h"
#include "tests/support/checked.h"

namespace speedlabs::checked {

std::vector<Exercise> exercises() {
  return {
      {"checkpointed_block",
       [](at::Generator& generator) {
         const int64_t rows = draw_int(generator, 1, 64), width = draw_int(generator, 4, 48);
         const auto draw = [&](int64_t out, int64_t in) {
           return (torch::randn({out, in}, generator, torch::kFloat) / std::sqrt(double(in))).requires_grad_();
         };
         const auto w1 = draw(4 * width, width), w2 = draw(width, 4 * width);
         const auto x = torch::randn({rows, width}, generator, torch::kFloat).requires_grad_();
         // Dropout draws from the global generator: seeded from the grader's draw, so the replay must restore it.
         torch::manual_seed(static_cast<uint64_t>(draw_int(generator, 0, 1 << 30)));
         const lab08::BlockFn block = [&](const torch::Tensor& in) {
           return torch::dropout(torch::gelu(in.matmul(w1.t())), 0.2, true).matmul(w2.t());
         };
         const auto y = lab08::checkpointed_block(block, x);
         const auto upstream = torch::randn(y.sizes(), generator, torch::kFloat);
         (y * upstream).sum().backward();
         return Outputs{{"output", y.detach()}, {"grad_x", x.grad()}, {"grad_w1", w1.grad()}, {"grad_w2", w2.grad()}};
       },
       // The recomputation runs the very ops of the forward on the same inputs and random state: the same float32
       // results up to the order libtorch sums the gradients in (1e-5 relative, 1e-6 absolute for those near 0).
       // A replay with another dropout mask or a missing gradient differs by far more.
       Tolerance{1e-5, 1e-6}},
  };
}

}  // namespace speedlabs::checked
