// Lab 14, checked outside the student's process (tests/support/checked.h): the 1F1B order of every stage of
// pipelines whose depth and number of micro-batches the grader's seed draws.
#include "tests/support/checked.h"
#include "exercise.h"

namespace speedlabs::checked {

std::vector<Exercise> exercises() {
  return {
      {"one_f_one_b_schedule",
       [](at::Generator& generator) {
         // Per pipeline, per stage, per operation: (pipeline, stage, backward 0|1, micro-batch). Fewer, as many
         // and more micro-batches than stages.
         std::vector<int64_t> rows;
         for (int64_t pipeline = 0; pipeline < 40; ++pipeline) {
           const int stages = static_cast<int>(draw_int(generator, 1, 8));
           const int micro_batches = static_cast<int>(draw_int(generator, 1, 2 * stages + 2));
           for (int stage = 0; stage < stages; ++stage)
             for (const auto& op : lab14::one_f_one_b_schedule(stage, stages, micro_batches))
               rows.insert(rows.end(), {pipeline, stage, op.kind == lab14::PipeOp::backward ? 1 : 0, op.micro_batch});
         }
         return Outputs{{"operations", torch::tensor(rows, torch::kLong).view({-1, 4})}};
       },
       Tolerance{}},  // an order: exactly
  };
}

}  // namespace speedlabs::checked
