// Lab 10, checked outside the student's process (tests/support/checked.h): what the gradient hook copies where
// and when each bucket's all-reduce starts, and the gradients the wait hands the optimizer, for parameters,
// bucket sizes, arrival orders and other workers' gradients the grader's seed draws; and the bucketed step's
// speed, 2-worker jobs timed outside against the naive step's.
#include <functional>
#include <string>
#include <vector>

#include "buckets.h"
#include "common/errors.h"
#include "datasets/data_files.h"
#include "datasets/token_cache.h"
#include "exercise.h"
#include "tests/lab10/graded_job.h"
#include "tests/lab10/speed_rules.h"
#include "tests/support/checked.h"
#include "tests/support/one_process_communicator.h"

namespace speedlabs::checked {

namespace {

// Rank 0 of size() workers in one process. The other workers' summed gradients are drawn from the grader's seed
// when an all-reduce starts, so a wait that skips them, or a bucket that never starts, gives other outputs.
class DrawnWorkers : public speedlabs::testing::OneProcessCommunicator {
 public:
  DrawnWorkers(int size, at::Generator& generator)
      : OneProcessCommunicator(0, size, "lab 10's data parallelism"), generator_(generator) {}

  int start_allreduce_sum(const torch::Tensor& flat) override {
    sent.push_back(flat.clone());
    in_flight_.push_back(flat);
    others_.push_back(torch::randn(flat.sizes(), generator_, torch::kFloat));
    return static_cast<int>(in_flight_.size()) - 1;
  }

  void wait(int handle) override {
    if (handle < 0 || handle >= static_cast<int>(in_flight_.size()) || !in_flight_[handle].defined()) {
      throw speedlabs::RuntimeFailure("wait(" + std::to_string(handle) + "): no all-reduce in flight has it");
    }
    in_flight_[handle].add_(others_[handle]);
    in_flight_[handle] = torch::Tensor();  // waited: a second wait on it is an error
    ++waits;
  }

  std::vector<torch::Tensor> sent;  ///< each started bucket as it was when its all-reduce started
  int64_t waits = 0;                ///< wait() calls

 private:
  at::Generator& generator_;
  std::vector<torch::Tensor> in_flight_;  // the buckets' own tensors, until waited for
  std::vector<torch::Tensor> others_;     // the other workers' sum for each all-reduce
};

// 1 to 64 parameters (the lab's GPTs have 28 to 52) of 1 to 3 dimensions of 1 to 8 (1 to 512 elements), in buckets
// of 1 to 600 floats: some buckets hold several parameters, some parameters are larger than a bucket.
struct Drawn {
  std::vector<torch::Tensor> params;
  std::vector<torch::Tensor> grads;
  int64_t bucket_bytes = 0;
};

Drawn draw_model(at::Generator& generator) {
  Drawn drawn;
  const int64_t count = draw_int(generator, 1, 64);
  for (int64_t p = 0; p < count; ++p) {
    std::vector<int64_t> shape;
    for (int64_t d = draw_int(generator, 1, 3); d > 0; --d) shape.push_back(draw_int(generator, 1, 8));
    drawn.params.push_back(torch::zeros(shape).requires_grad_());
    drawn.grads.push_back(torch::randn(shape, generator, torch::kFloat));
  }
  drawn.bucket_bytes = 4 * draw_int(generator, 1, 600);
  return drawn;
}

torch::Tensor longs(const std::vector<int64_t>& values) { return torch::tensor(values, torch::kLong); }

Outputs hook_case(at::Generator& generator) {
  DrawnWorkers workers(static_cast<int>(draw_int(generator, 2, 8)), generator);
  Drawn drawn = draw_model(generator);
  lab10::GradientBuckets buckets = lab10::make_gradient_buckets(drawn.params, drawn.bucket_bytes, workers);
  const torch::Tensor order = torch::randperm(static_cast<int64_t>(drawn.params.size()), generator, torch::kLong);
  std::vector<int64_t> started_after;  // all-reduces started after each gradient: each bucket at once when full
  for (int64_t i = 0; i < order.numel(); ++i) {
    const auto param = static_cast<size_t>(order[i].item<int64_t>());
    lab10::on_gradient_ready(buckets, param, drawn.grads[param]);
    started_after.push_back(static_cast<int64_t>(workers.sent.size()));
  }
  std::vector<int64_t> state;  // each bucket's ready count and handle
  for (const lab10::Bucket& bucket : buckets.buckets) state.insert(state.end(), {int64_t(bucket.ready), bucket.handle});
  return {{"started_after", longs(started_after)},
          {"sent", workers.sent.empty() ? torch::zeros({0}) : torch::cat(workers.sent)},
          {"bucket_state", longs(state)},
          {"waits", longs({workers.waits})}};
}

Outputs wait_case(at::Generator& generator) {
  DrawnWorkers workers(static_cast<int>(draw_int(generator, 2, 8)), generator);
  Drawn drawn = draw_model(generator);
  lab10::GradientBuckets buckets = lab10::make_gradient_buckets(drawn.params, drawn.bucket_bytes, workers);
  // One draw in four leaves a bucket unstarted, as when a parameter got no gradient: the wait must refuse it.
  const int64_t unstarted =
      draw_int(generator, 0, 3) == 0 ? draw_int(generator, 0, static_cast<int64_t>(buckets.buckets.size()) - 1) : -1;
  for (size_t b = 0; b < buckets.buckets.size(); ++b) {  // as on_gradient_ready leaves them after backward
    if (static_cast<int64_t>(b) == unstarted) continue;
    lab10::Bucket& bucket = buckets.buckets[b];
    for (size_t p : bucket.params) {
      bucket.flat.narrow(0, buckets.offset_of[p], drawn.grads[p].numel()).copy_(drawn.grads[p].flatten());
    }
    bucket.ready = bucket.params.size();
    bucket.handle = workers.start_allreduce_sum(bucket.flat);
  }
  try {
    lab10::wait_for_gradients(buckets);
  } catch (const speedlabs::RuntimeFailure&) {
    return {{"refused", longs({1})}, {"grads", torch::zeros({0})}, {"bucket_state", longs({})}};
  }
  std::vector<torch::Tensor> grads;  // every .grad in parameter order; one of the wrong shape fails the check
  for (const torch::Tensor& param : drawn.params) {
    const torch::Tensor grad = param.grad();
    grads.push_back(grad.defined() && grad.sizes() == param.sizes() ? grad.flatten() : torch::full({1}, NAN));
  }
  std::vector<int64_t> state;
  for (const lab10::Bucket& bucket : buckets.buckets) state.insert(state.end(), {int64_t(bucket.ready), bucket.handle});
  state.push_back(workers.waits);
  return {{"refused", longs({0})}, {"grads", torch::cat(grads)}, {"bucket_state", longs(state)}};
}

// Three drawn cases, their outputs named case0_..., case1_..., case2_...: an answer right only for some sizes fails.
Outputs three_cases(const std::function<Outputs(at::Generator&)>& one_case, at::Generator& generator) {
  Outputs all;
  for (int drawn = 0; drawn < 3; ++drawn) {
    for (auto& [name, tensor] : one_case(generator))
      all.emplace_back("case" + std::to_string(drawn) + "_" + name, tensor);
  }
  return all;
}

// The timed job: 2 workers train kTimedSteps steps of the graded size from initial weights the seed draws, in one
// mode: the exercise's bucketed step, the best's naive step (one blocking all-reduce per gradient), or, for the
// inputs-only side, no step at all (what both sides pay: mpirun, the workers' start, the data, the model, their
// end, taken off both sides' times). 30 steps of about 60 ms on two cores take as long as that start-up (about 2 s),
// enough for rounds whose spread decides on a quiet machine.
constexpr int kTimedSteps = 30;

Outputs timed_job(at::Generator& generator, Side side) {
  lab10::Config config = speedlabs::testing::graded_job_config();
  config.seed = static_cast<uint64_t>(draw_int(generator, 0, int64_t{1} << 40));
  config.steps = side == Side::inputs_only ? 0 : kTimedSteps;
  const std::string mode = side == Side::exercise ? "bucketed" : "naive";
  const lab10::ModeTrace trace = lab10::run_job(config, 2, {mode}, false).mode(mode);
  if (side == Side::inputs_only) return {};
  const std::vector<int64_t> in_sync(trace.in_sync.begin(), trace.in_sync.end());  // 1: the workers' weights agreed
  return {{"losses", torch::tensor(trace.losses, torch::kDouble)}, {"in_sync", torch::tensor(in_sync, torch::kLong)}};
}

}  // namespace

std::vector<Exercise> exercises() {
  return {
      // Copies and counts: exactly.
      {"on_gradient_ready", [](at::Generator& generator) { return three_cases(hook_case, generator); }, Tolerance{}},
      // The other workers' sum is added by the communicator, the same in both; the average divides it by the
      // workers (flat / N or flat * (1 / N) differ by at most one float32 rounding: 2.4e-7 relative). Counts
      // and handles are small whole numbers, exact under that tolerance.
      {"wait_for_gradients", [](at::Generator& generator) { return three_cases(wait_case, generator); },
       Tolerance{2.4e-7, 0}},
  };
}

// Speed, timed outside (./lab grade): a 2-worker job of the bucketed step against one of the naive step, each on
// the same two CPUs, one worker a CPU; every step's loss (the global batch's, after the step's forward) and
// whether the workers' weights agreed after it, checked against the naive job's on the same seed: a step that
// skips the all-reduce is fast and wrong. The losses within 1e-4 relative, as the lab's kLossRtol (the same sums
// in another grouping, float32); agreement exactly. Points by the exercise's rule in tests/lab10/points.tsv, as the
// graded test in tests/lab10/graded.cpp in the student's own process.
std::vector<Timed> timed() {
  constexpr auto rule = lab10::speed_rules::on_gradient_ready_speed;
  Timed job{"on_gradient_ready_speed", 1, rule.full, rule.zero, timed_job, Tolerance{1e-4, 0},
            // The data found and its tokens cached before "ready", so no job of the timing makes the cache.
            [] { datasets::load_shakespeare_tokens(datasets::resolve_data_dir()); }};
  job.cpus = 2;
  return {job};
}

}  // namespace speedlabs::checked
