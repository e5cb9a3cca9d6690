// Lab 05, checked outside the student's process (tests/support/checked.h): causal attention written out, on
// shapes the grader's seed draws.
#include "tests/support/checked.h"
#include "exercise.h"

namespace speedlabs::checked {

std::vector<Exercise> exercises() {
  return {
      {"causal_attention",
       [](at::Generator& generator) {
         const auto qkv = draw_attention_inputs(generator, 4);
         return Outputs{{"out", lab05::causal_attention(qkv[0], qkv[1], qkv[2])}};
       },
       // Two float32 computations in different orders, each about 1e-6 relative from the exact result; outputs
       // average values of size ~1, so 1e-6 absolute beside 2e-5 relative covers those near 0. A missing scale
       // or a mask off by one errs by 1e-2 or more.
       Tolerance{2e-5, 1e-6}},
  };
}

}  // namespace speedlabs::checked
