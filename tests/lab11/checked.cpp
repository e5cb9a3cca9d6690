// Lab 11, checked outside the student's process (tests/support/checked.h): the shard every worker owns, for
// buffer sizes and worker counts the grader's seed draws, and three AdamW steps on a drawn shard.
#include <cmath>

#include "exercise.h"
#include "tests/support/checked.h"

namespace speedlabs::checked {

std::vector<Exercise> exercises() {
  return {
      {"shard_range",
       [](at::Generator& generator) {
         // (numel, padded, shard_size, begin, end) of every rank, for sizes below, at and above the workers.
         std::vector<int64_t> fields;
         for (int drawn = 0; drawn < 200; ++drawn) {
           const int workers = static_cast<int>(draw_int(generator, 1, 16));
           const int64_t numel = draw_int(generator, 0, 3) == 0 ? draw_int(generator, 0, 2 * workers)
                                                                : draw_int(generator, 0, int64_t{1} << 40);
           for (int rank = 0; rank < workers; ++rank) {
             const auto range = lab11::shard_range(numel, rank, workers);
             fields.insert(fields.end(), {range.numel, range.padded, range.shard_size, range.begin, range.end});
           }
         }
         return Outputs{{"ranges", torch::tensor(fields, torch::kLong).view({-1, 5})}};
       },
       Tolerance{}},  // whole numbers: exactly
      {"sharded_adamw_step",
       [](at::Generator& generator) {
         // One shard of 1 to 4096 elements, three steps with fresh gradients; settings drawn around the lab's.
         const int64_t numel = draw_int(generator, 1, 4096);
         const torch::Tensor param = torch::randn({numel}, generator, torch::kFloat);
         lab11::AdamWSettings settings;
         settings.lr = std::ldexp(1.0, -static_cast<int>(draw_int(generator, 4, 12)));
         settings.weight_decay = draw_int(generator, 0, 1) ? 0.1 : 0.0;
         settings.beta2 = draw_int(generator, 0, 1) ? 0.95 : 0.999;
         lab11::AdamWShard state;
         for (int step = 0; step < 3; ++step) {
           lab11::sharded_adamw_step(param, torch::randn({numel}, generator, torch::kFloat), state, settings);
         }
         return Outputs{{"param", param},
                        {"exp_avg", state.exp_avg.defined() ? state.exp_avg : torch::zeros({0})},
                        {"exp_avg_sq", state.exp_avg_sq.defined() ? state.exp_avg_sq : torch::zeros({0})},
                        {"step", torch::tensor({state.step}, torch::kLong)}};
       },
       // AdamW's float32 formula in two op orders: each within a few roundings (1e-7 relative) of the exact value;
       // an element moves by about lr (2^-12 or more) a step, so 1e-5 relative and 1e-7 absolute leave room and
       // still catch a missing bias correction, a coupled decay or a lost step (as lab 06's check of AdamW).
       Tolerance{1e-5, 1e-7}},
  };
}

}  // namespace speedlabs::checked
