// Lab 13, checked outside the student's process (tests/support/checked.h): the trainer from make_trainer(),
// given a token stream drawn from the grader's seed, takes a fixed number of steps and hands back its weights;
// outside, the grader judges them (a trainer has many right answers, so no two trainers' weights are compared):
// every weight of the GPT present, float32, of its shape and finite, and the held-out continuation of the stream,
// which the trainer never receives, at a loss under a bound that any working trainer of the course gets under.
// Its speed is raced outside (make_trainer_speed): the trainer against the lab's baseline to the quick target on
// tiny shakespeare's characters, relabeled by a permutation the seed draws, each side's weights judged outside.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/gpt.h"
#include "common/host_memory.h"
#include "datasets/data_files.h"
#include "labs/13_speedrun/exercise.h"
#include "labs/13_speedrun/recipe.h"
#include "labs/13_speedrun/src/experiment.h"
#include "labs/13_speedrun/src/task.h"
#include "tests/lab13/speed_rules.h"
#include "tests/support/checked.h"

namespace speedlabs::checked {

namespace {

namespace gpt = speedlabs::gpt;

// The steps the trainer takes: enough to leave the initial loss (about ln 65 = 4.17) far behind on a repeating
// stream, few enough for a few seconds of the quick model per side.
constexpr int kSteps = 40;
// The held-out loss every working trainer gets under after kSteps: the baseline's recipe (run as its Python peer,
// which tracks it step for step) ended at 1.1-1.3 for cycles of 8, 20 and 32 characters, though its warm-up keeps
// the rate low for all 40 steps; weights that did not learn stay near 4.17.
constexpr double kHeldOutLossBound = 3.0;
// The stream: a cycle of distinct characters, repeated; the held-out part continues the cycle.
constexpr int64_t kCycleMin = 8, kCycleMax = 32;
constexpr int64_t kTrainTokens = 16384, kHeldOutWindows = 4;
// The weight the outputs end with: a layer norm's gain (about 1), where any changed high byte makes the
// judged loss not finite or far off.
constexpr const char* kLastWeight = "transformer.ln_f.weight";

// What one check or race trains on, drawn from the seed: the model, the trainer's config and the held-out tokens.
struct Task {
  lab13::TrainerConfig config;
  std::vector<int32_t> held_out;  // only the judge reads them
};

// The quick race's model, B, T and learning rate, at most @p max_steps steps on @p train, the initial weights'
// seed drawn from @p generator.
lab13::TrainerConfig quick_trainer_config(at::Generator& generator, std::vector<int32_t> train, int max_steps) {
  const lab13::Config quick = lab13::quick_config();
  lab13::TrainerConfig config;
  config.model = lab13::model_of(quick);
  config.recipe = quick.recipe;
  config.seed = static_cast<uint64_t>(draw_int(generator, 0, 1 << 30));
  config.max_steps = max_steps;
  config.train_tokens = std::make_shared<const std::vector<int32_t>>(std::move(train));
  return config;
}

Task draw_task(at::Generator& generator) {
  const int64_t cycle_length = draw_int(generator, kCycleMin, kCycleMax);
  const auto drawn = torch::randperm(lab13::kVocabulary, generator, torch::kInt).narrow(0, 0, cycle_length);
  const std::vector<int32_t> cycle(drawn.data_ptr<int32_t>(), drawn.data_ptr<int32_t>() + cycle_length);
  const int64_t held_out = kHeldOutWindows * lab13::kEvalContext + 1;
  std::vector<int32_t> stream(kTrainTokens + held_out);
  for (size_t i = 0; i < stream.size(); ++i) stream[i] = cycle[i % cycle.size()];
  Task task;
  task.config = quick_trainer_config(generator, {stream.begin(), stream.begin() + kTrainTokens}, kSteps);
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

// The race's data: the lab's split of tiny shakespeare (task.h), loaded once before a process says it is ready.
const lab13::Split& shakespeare() {
  static const lab13::Split split = lab13::split_tokens(lab13::load_characters(datasets::resolve_data_dir()));
  return split;
}

// @p ids with every token id t replaced by permutation[t].
std::vector<int32_t> relabeled(const std::vector<int32_t>& ids, const torch::Tensor& permutation) {
  const int32_t* to = permutation.data_ptr<int32_t>();
  std::vector<int32_t> out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) out[i] = to[ids[i]];
  return out;
}

// One race's task, drawn from the seed: the quick race on the split relabeled by a permutation of the 65
// characters (the language is the same to a model that starts from random weights; weights or answers kept from
// another grade are not), its held-out tokens the relabeled validation split.
Task draw_race_task(at::Generator& generator) {
  const auto permutation = torch::randperm(lab13::kVocabulary, generator, torch::kInt);
  Task task;
  task.config =
      quick_trainer_config(generator, relabeled(*shakespeare().train, permutation), lab13::quick_config().step_cap);
  task.held_out = relabeled(shakespeare().validation, permutation);
  return task;
}

// Steps a side runs between two judgments: finer than the lab's validation (every 50), so that the reference
// trainer's few steps to the quick target still make segments enough to judge their scatter (at 50 it made 2,
// and 2 of 3 races could not decide).
constexpr int64_t kRaceSegmentSteps = 10;

Segment start_race(at::Generator& generator, Side side) {
  auto task = std::make_shared<Task>(draw_race_task(generator));
  std::shared_ptr<lab13::Trainer> trainer =
      side == Side::exercise ? lab13::make_trainer() : lab13::make_baseline_trainer();
  if (!trainer) throw std::runtime_error("make_trainer() returned no trainer");
  return [task, trainer, started = false]() mutable {
    if (!started) trainer->init(task->config);
    started = true;
    for (int64_t s = 0; s < kRaceSegmentSteps; ++s) trainer->step();
    Outputs weights;
    for (const auto& [name, tensor] : trainer->weights()) weights.emplace_back(name, tensor.detach().to(torch::kCPU));
    return weights;
  };
}

// Heap a racer's trainer uses: each side's process held about 950 MB (libtorch's code included) in the quick race.
// Under 1 GiB, keep_freed_host_memory's trim threshold, so that the freed heap stays in the process.
constexpr size_t kRaceHeapBytes = size_t{768} << 20;

// Touches @p bytes of heap once and frees them; the heap keeps them. A VM backs a page of its memory only when it
// is first touched, and takes freed pages back: in the first timed segment, the side that found fewer backed pages
// spent 1-5 s more (the kernel clearing pages) than the other, every race, to the first side's gain. Touched
// before "ready", both sides' trainers start on backed memory alike.
void touch_heap(size_t bytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  auto* memory = static_cast<volatile char*>(std::malloc(bytes));
  if (memory == nullptr) return;  // less memory than the race would like: the race itself will say so
  for (size_t at = 0; at < bytes; at += page) memory[at] = 1;
  std::free(const_cast<char*>(memory));
}

// The evaluator's loss (task.h) on the relabeled validation split: NaN for a weight not finite, an exception for
// weights that are not the model's.
double race_loss(at::Generator& generator, const Outputs& weights) {
  const Task task = draw_race_task(generator);
  std::string problem;
  return lab13::evaluate(task.config.model, weights, task.held_out, problem);
}

}  // namespace

// The judged facts are integers: compared exactly.
std::vector<Exercise> exercises() { return {{"make_trainer", trained_weights, Tolerance{}, judge_weights}}; }

// Speed, raced outside (./lab grade): the quick race of the lab (its model, recipe, target, judged every
// kRaceSegmentSteps steps, at most step_cap steps a side), the score as in the graded test in tests/lab13/graded.cpp,
// its thresholds the exercise's rule in tests/lab13/points.tsv. Both sides' processes keep freed memory alike, as the
// lab's race does, and start on heap already touched.
std::vector<Raced> raced() {
  const lab13::Config quick = lab13::quick_config();
  constexpr auto rule = lab13::speed_rules::make_trainer_speed;
  return {{"make_trainer_speed", rule.full, rule.zero, quick.target, kRaceSegmentSteps, quick.step_cap, start_race,
           race_loss, [] {
             shakespeare();
             speedlabs::keep_freed_host_memory();
             touch_heap(kRaceHeapBytes);
           }}};
}

}  // namespace speedlabs::checked
