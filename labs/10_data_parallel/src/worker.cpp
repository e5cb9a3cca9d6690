#include "worker.h"

#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>

#include "buckets.h"
#include "common/errors.h"
#include "common/format.h"
#include "common/gpt.h"
#include "common/workers/harness.h"
#include "datasets/data_files.h"
#include "datasets/data_loader.h"
#include "datasets/token_cache.h"
#include "exercise.h"

namespace lab10 {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(JobSpec, model, batch, seq, steps, lr, seed, bucket_mb, modes, micro_batches,
                                   data_dir, log_every)

nlohmann::json to_json(const JobSpec& spec) { return spec; }

namespace {

using speedlabs::fixed;
using speedlabs::gpt::GPT;
using speedlabs::workers::Engine;
using speedlabs::workers::finish_queued_work;
using speedlabs::workers::ms_since;
using speedlabs::workers::weights_checksum;
using Clock = std::chrono::steady_clock;

// What one mode measured on this worker, step by step (losses are the global batch's).
struct Trace {
  std::vector<double> losses, step_ms, comm_ms;
  std::vector<bool> in_sync;
};

void print_step(const std::string& mode, int step, double loss, double step_ms, double comm_ms) {
  std::cout << "  " << std::left << std::setw(9) << mode << std::right << "step " << std::setw(3) << step << " | loss "
            << fixed(loss, 6) << " | " << std::setw(8) << fixed(step_ms, 1) << " ms/step | " << std::setw(7)
            << fixed(comm_ms, 1) << " ms in all-reduce" << std::endl;
}

// Trains spec.steps steps in @p mode from the seed's weights, every worker on its rows of each batch.
// engine.control carries the control messages (losses, checksums), engine.gradients the gradients.
Trace train(const JobSpec& spec, const std::string& mode, const Engine& engine, const std::vector<int32_t>& tokens) {
  auto& comm = engine.control;
  const int workers = comm.size();
  const int64_t rows = speedlabs::workers::rows_per_worker(spec.batch, workers);
  torch::manual_seed(spec.seed);
  GPT model(engine.model_config(spec.model));
  speedlabs::workers::check_workers_agree(spec.batch, spec.seq, model, comm);
  model->to(engine.device);
  auto optimizer = speedlabs::gpt::make_adamw(model, spec.lr);
  auto params = model->parameters();
  GradientBuckets buckets;
  if (mode == "bucketed") {
    buckets = make_gradient_buckets(params, bucket_bytes(spec.bucket_mb), engine.gradients);
    attach_gradient_hooks(buckets);  // the hooks point at `buckets`, which stays put until the model is gone
  }
  datasets::DataLoaderLite loader(tokens, spec.batch, spec.seq);
  Trace trace;
  for (int step = 0; step < spec.steps; ++step) {
    const auto batch = loader.next_batch();
    const auto x = batch.x.narrow(0, comm.rank() * rows, rows).to(engine.device);
    const auto y = batch.y.narrow(0, comm.rank() * rows, rows).to(engine.device);

    const auto clock = engine.start_step(step);
    const auto loss = model->forward(x, y).loss;
    loss.backward();  // bucketed: the hooks fill the buckets and start their all-reduces in here
    if (mode == "naive") {
      for (auto& p : params) {  // one all-reduce per gradient, after backward, each waited for at once
        engine.gradients.allreduce_sum(p.grad());
        p.mutable_grad().div_(workers);
      }
    } else if (mode == "bucketed") {
      wait_for_gradients(buckets);
    }
    optimizer.step();
    optimizer.zero_grad();
    const auto time = clock.stop();
    trace.step_ms.push_back(time.ms);
    trace.comm_ms.push_back(time.comm_ms);

    // Measurement, outside the timed step: the global batch's loss, and whether the weights still agree.
    trace.losses.push_back(comm.sum(loss.item<double>()) / workers);
    const auto [low, high] = comm.min_max(weights_checksum(model->parameters()));
    trace.in_sync.push_back(low == high);
    if (comm.rank() == 0 && (step % spec.log_every == 0 || step == spec.steps - 1)) {
      print_step(mode, step, trace.losses.back(), trace.step_ms.back(), trace.comm_ms.back());
    }
  }
  return trace;
}

// The all-reduce alone: one flat buffer of all the gradients, a few times, for its bandwidth.
nlohmann::json allreduce_benchmark(int64_t elements, const Engine& engine) {
  auto flat = torch::ones({elements}, torch::TensorOptions(torch::kFloat).device(engine.device));
  std::vector<double> ms;
  for (int i = 0; i < 6; ++i) {
    finish_queued_work(engine.device);
    const auto start = Clock::now();
    engine.gradients.allreduce_sum(flat);
    finish_queued_work(engine.device);
    if (i > 0) ms.push_back(ms_since(start));  // the first call sets up buffers and connections
  }
  const std::vector<double> samples = ms;  // in the order made, for the launcher's spread
  std::sort(ms.begin(), ms.end());
  return {{"bytes", elements * 4}, {"median_ms", ms[ms.size() / 2]}, {"samples_ms", samples}};
}

// K micro-batches of B/K rows, their losses divided by K and their gradients summed by backward,
// against one batch of B rows: the same gradient, so the same optimizer update.
nlohmann::json accumulation_check(const JobSpec& spec, const Engine& engine, const std::vector<int32_t>& tokens) {
  torch::manual_seed(spec.seed);
  GPT model(engine.model_config(spec.model));
  datasets::DataLoaderLite loader(tokens, spec.batch, spec.seq);
  const auto batch = loader.next_batch();
  const auto params = model->parameters();
  auto grads = [&] {
    std::vector<torch::Tensor> copy;
    for (const auto& p : params) copy.push_back(p.grad().clone());
    for (const auto& p : params) p.mutable_grad() = torch::Tensor();
    return copy;
  };

  const double loss_large = [&] {
    const auto loss = model->forward(batch.x, batch.y).loss;
    loss.backward();
    return loss.item<double>();
  }();
  const auto large = grads();

  const int k = spec.micro_batches;
  const int64_t rows = spec.batch / k;
  double loss_accumulated = 0;
  for (int i = 0; i < k; ++i) {
    const auto loss = model->forward(batch.x.narrow(0, i * rows, rows), batch.y.narrow(0, i * rows, rows)).loss / k;
    loss.backward();  // adds into .grad: the gradients of the micro-batches accumulate
    loss_accumulated += loss.item<double>();
  }
  const auto accumulated = grads();

  double max_diff = 0, max_grad = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    max_diff = std::max(max_diff, (large[i] - accumulated[i]).abs().max().item<double>());
    max_grad = std::max(max_grad, large[i].abs().max().item<double>());
  }
  return {{"micro_batches", k},
          {"loss_large", loss_large},
          {"loss_accumulated", loss_accumulated},
          {"max_abs_grad_diff", max_diff},
          {"max_abs_grad", max_grad}};
}

nlohmann::json run_modes(const JobSpec& spec, const Engine& engine) {
  auto& comm = engine.control;
  const auto tokens = datasets::load_shakespeare_tokens(spec.data_dir).ids;
  nlohmann::json result{{"workers", comm.size()}};
  for (const auto& mode : spec.modes) {
    if (mode != "single" && mode != "naive" && mode != "bucketed") {
      throw speedlabs::UsageError("unknown mode '" + mode + "'");
    }
    const Trace trace = train(spec, mode, engine, tokens);
    result["modes"][mode] = {
        {"losses", trace.losses}, {"step_ms", trace.step_ms}, {"comm_ms", trace.comm_ms}, {"in_sync", trace.in_sync}};
  }
  torch::manual_seed(spec.seed);
  GPT model(engine.model_config(spec.model));
  const int64_t parameters = speedlabs::gpt::parameter_count(model);
  result["parameters"] = parameters;
  result["buckets"] = make_gradient_buckets(model->parameters(), bucket_bytes(spec.bucket_mb), comm).buckets.size();
  if (comm.size() > 1) result["allreduce"] = allreduce_benchmark(parameters, engine);
  if (spec.micro_batches > 0 && comm.rank() == 0) result["accumulation"] = accumulation_check(spec, engine, tokens);
  return result;
}

}  // namespace

int worker_main(int argc, char** argv, const std::string& envelope_text) {
  return speedlabs::workers::run_mpi_worker(argc, argv, "lab10 worker", envelope_text,
                                            [](const nlohmann::json& job, Engine& engine) {
                                              return run_modes(speedlabs::workers::job_from_json<JobSpec>(job), engine);
                                            });
}

}  // namespace lab10
