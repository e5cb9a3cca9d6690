// Lab 13, checked outside the student's process (tests/support/checked.h): the trainer from make_trainer(),
// given a token stream drawn from the grader's seed, takes a fixed number of steps and hands back its weights;
// outside, the grader judges them (a trainer has many right answers, so no two trainers' weights are compared):
// every weight of the GPT present, float32, of its shape and finite, and the held-out continuation of the stream,
// which the trainer never receives, at a loss under a bound that any working trainer of the course gets under.
#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/gpt.h"
#include "labs/13_speedrun/exercise.h"
#include "labs/13_speedrun/experiment.h"
#include "labs/13_speedrun/task.h"
#include "tests/support/checked.h"

namespace speedlabs::checked {

namespace {

namespace gpt = speedlabs::gpt;

// The steps the trainer takes: enough to leave the initial loss (about ln 50257 = 10.8) far behind on a
// repeating stream, few enough for a few seconds of the quick model per side.
constexpr int kSteps = 40;
// The held-out loss every working trainer gets under after kSteps: on a 2-core AMD EPYC VM the stub's plain float32
// AdamW ended at 8.0-8.1 and the reference at 7.5-7.7 (three seeds each); weights that did not learn stay near
// 10.8.
constexpr double kHeldOutLossBound = 9.5;
// The stream: a cycle of distinct GPT-2 token ids, repeated; the held-out part continues the cycle.
constexpr int64_t kCycleMin = 8, kCycleMax = 32;
constexpr int64_t kTrainTokens = 16384, kHeldOutWindows = 4;
// The weight the outputs end with: a layer norm's gain (about 1), where any changed high byte makes the
// judged loss not finite or far off.
constexpr const char* kLastWeight = "transformer.ln_f.weight";

// What one check trains on, drawn from the seed: the model, the trainer's config and the held-out tokens.
struct Task {
  lab13::TrainerConfig config;
  std::vector<int32_t> held_out;
};

Task draw_task(at::Generator& generator) {
  const int64_t cycle_length = draw_int(generator, kCycleMin, kCycleMax);
  const auto drawn = torch::randperm(gpt::GPTConfig{}.vocab_size, generator, torch::kInt).narrow(0, 0, cycle_length);
  const std::vector<int32_t> cycle(drawn.data_ptr<int32_t>(), drawn.data_ptr<int32_t>() + cycle_length);
  const int64_t held_out = kHeldOutWindows * lab13::kEvalContext + 1;
  std::vector<int32_t> stream(kTrainTokens + held_out);
  for (size_t i = 0; i < stream.size(); ++i) stream[i] = cycle[i % cycle.size()];
  const lab13::Config quick = lab13::quick_config();
  Task task;
  task.config.model = lab13::model_of(quick);
  task.config.batch = quick.batch;
  task.config.seq = quick.seq;
  task.config.lr = quick.lr;
  task.config.seed = static_cast<uint64_t>(draw_int(generator, 0, 1 << 30));
  task.config.max_steps = kSteps;
  task.config.train_tokens =
      std::make_shared<const std::vector<int32_t>>(stream.begin(), stream.begin() + kTrainTokens);
  task.held_out.assign(stream.begin() + kTrainTokens, stream.end());
  return task;
}

// The GPT's weights, name and shape, in named_parameters() order with kLastWeight moved to the end.
std::vector<std::pair<std::string, std::vector<int64_t>>> weight_shapes(const gpt::GPTConfig& model) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  for (const auto& p : gpt::GPT(model)->named_parameters()) shapes.push_back({p.key(), p.value().sizes().vec()});
  std::stable_partition(shapes.begin(), shapes.end(), [](const auto& shape) { return shape.first != kLastWeight; });
  return shapes;
}

Outputs trained_weights(at::Generator& generator) {
  const Task task = draw_task(generator);
  auto trainer = lab13::make_trainer();
  if (!trainer) throw std::runtime_error("make_trainer() returned no trainer");
  trainer->init(task.config);
  for (int s = 0; s < kSteps; ++s) trainer->step();
  const gpt::NamedTensors weights = trainer->weights();
  Outputs outputs;
  for (const auto& weight : weight_shapes(task.config.model)) {
    const std::string& name = weight.first;
    const auto found = std::find_if(weights.begin(), weights.end(), [&](const auto& w) { return w.first == name; });
    // A missing weight is an empty output: the judge finds its shape wrong.
    outputs.push_back({name, found == weights.end() || !found->second.defined()
                                 ? torch::empty({0})
                                 : found->second.detach().to(torch::kCPU)});
  }
  return outputs;
}

// Judged outside: per weight 1 when float32, of the GPT's shape and finite; then 1 when the held-out loss of the
// weights is under the bound.
Outputs judge_weights(at::Generator& generator, const Outputs& outputs) {
  const Task task = draw_task(generator);
  const auto shapes = weight_shapes(task.config.model);
  std::vector<int64_t> well_formed;
  gpt::NamedTensors weights;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto& [name, shape] = shapes[i];
    const bool good = i < outputs.size() && outputs[i].first == name &&
                      outputs[i].second.scalar_type() == torch::kFloat && outputs[i].second.sizes() == shape &&
                      torch::isfinite(outputs[i].second).all().item<bool>();
    well_formed.push_back(good ? 1 : 0);
    if (good) weights.push_back({name, outputs[i].second});
  }
  bool under_bound = false;
  if (weights.size() == shapes.size() && outputs.size() == shapes.size()) {
    std::string problem;
    const double loss = lab13::evaluate(task.config.model, weights, task.held_out, problem);
    under_bound = std::isfinite(loss) && loss <= kHeldOutLossBound;
  }
  return {{"weights_float32_of_their_shape_and_finite", torch::tensor(well_formed, torch::kLong)},
          {"held_out_loss_under_the_bound", torch::tensor({int64_t{under_bound ? 1 : 0}}, torch::kLong)}};
}

}  // namespace

// The judged facts are integers: compared exactly.
std::vector<Exercise> exercises() { return {{"make_trainer", trained_weights, Tolerance{}, judge_weights}}; }

}  // namespace speedlabs::checked
