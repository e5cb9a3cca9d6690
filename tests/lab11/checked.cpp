// Lab 11, checked outside the student's process (tests/support/checked.h): the shard every worker owns, for
// buffer sizes and worker counts the grader's seed draws.
#include "tests/support/checked.h"
#include "exercise.h"

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
  };
}

}  // namespace speedlabs::checked
