#include "pipeline.h"

#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>

#include "common/errors.h"
#include "common/host_memory.h"
#include "common/workers/harness.h"
#include "datasets/data_loader.h"
#include "optimizer.h"

namespace lab14 {

std::vector<PipeOp> gpipe_schedule(int micro_batches) {
  if (micro_batches < 1) throw speedlabs::UsageError("GPipe needs at least one micro-batch");
  std::vector<PipeOp> ops;
  for (int m = 0; m < micro_batches; ++m) ops.push_back({PipeOp::forward, m});
  for (int m = 0; m < micro_batches; ++m) ops.push_back({PipeOp::backward, m});
  return ops;
}

std::vector<PipeOp> schedule_for(const std::string& schedule, int stage, int stages, int micro_batches) {
  if (schedule == "gpipe") return gpipe_schedule(micro_batches);
  if (schedule == "1f1b") return one_f_one_b_schedule(stage, stages, micro_batches);
  throw speedlabs::UsageError("unknown schedule '" + schedule + "': choose gpipe or 1f1b");
}

double bubble_formula(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

namespace {

using speedlabs::gpt::GPT;
using Clock = std::chrono::steady_clock;

int64_t now_ns() {  // steady_clock is the machine's monotonic clock: the stages' times compare across processes
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

constexpr int kGradientTag = 1 << 20;  // a backward's message; a forward's is tagged with its micro-batch

// This worker's stage: its run of blocks, with the embeddings on the first and ln_f and the head on the last.
struct Stage {
  GPT model{nullptr};  // the whole model, built from the seed on every worker; the stage uses its part
  int index = 0, count = 1;
  size_t first_block = 0, end_block = 0;
  bool first() const { return index == 0; }
  bool last() const { return index == count - 1; }

  std::vector<torch::Tensor> parameters() {
    std::vector<torch::Tensor> out;
    if (first() || last()) out.push_back(model->wte->weight);  // the token embedding, the tied head on the last
    if (first()) out.push_back(model->wpe->weight);
    for (size_t b = first_block; b < end_block; ++b) {
      for (const auto& p : model->h[b]->parameters()) out.push_back(p);
    }
    if (last()) {
      out.push_back(model->ln_f->weight);
      out.push_back(model->ln_f->bias);
    }
    return out;
  }
};

// A micro-batch between its forward and its backward: what the backward needs.
struct InFlight {
  torch::Tensor input;   // the received activation (a leaf that requires grad); undefined on stage 0
  torch::Tensor output;  // the stage's output, or on the last stage its share of the loss (loss / M)
};

// One step's pipeline phase on one stage.
struct StepTrace {
  std::vector<int64_t> times;    // per operation in order: start, end (ns); first the phase's start
  double loss = 0;               // the last stage's sum of loss / M
  int most_in_flight = 0;        // the most micro-batches held at once
  int64_t activation_bytes = 0;  // the most bytes live beyond those at the phase's start
};

class StageRunner {
 public:
  StageRunner(Stage& stage, const torch::Tensor& x, const torch::Tensor& y, int micro_batches)
      : stage_(stage), x_(x.chunk(micro_batches)), y_(y.chunk(micro_batches)), m_(micro_batches) {}

  StepTrace run(const std::vector<PipeOp>& ops) {
    StepTrace trace;
    const int64_t base = speedlabs::host_memory_stats().live_bytes;
    speedlabs::reset_host_memory_peak();
    trace.times.push_back(now_ns());
    for (const PipeOp& op : ops) {
      if (op.kind == PipeOp::forward) {
        forward(op.micro_batch, trace);
      } else {
        backward(op.micro_batch, trace);
      }
      trace.most_in_flight = std::max(trace.most_in_flight, static_cast<int>(held_.size()));
    }
    MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    trace.activation_bytes = speedlabs::host_memory_stats().peak_bytes - base;
    return trace;
  }

 private:
  torch::Tensor receive(int from, int tag) {
    auto buffer = torch::empty({x_[0].size(0), x_[0].size(1), stage_.model->config().n_embd});
    MPI_Recv(buffer.data_ptr<float>(), static_cast<int>(buffer.numel()), MPI_FLOAT, from, tag, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    return buffer;
  }
  void send(const torch::Tensor& t, int to, int tag) {
    sending_.push_back(t.detach().contiguous());
    requests_.emplace_back();
    MPI_Isend(sending_.back().data_ptr<float>(), static_cast<int>(sending_.back().numel()), MPI_FLOAT, to, tag,
              MPI_COMM_WORLD, &requests_.back());
  }

  void forward(int m, StepTrace& trace) {
    InFlight held;
    torch::Tensor h;
    if (stage_.first()) {
      trace.times.push_back(now_ns());
      const auto positions = torch::arange(x_[m].size(1), x_[m].options());
      h = stage_.model->wte->forward(x_[m]) + stage_.model->wpe->forward(positions);
    } else {
      held.input = receive(stage_.index - 1, m).requires_grad_();
      trace.times.push_back(now_ns());  // the wait for the activation is idle time
      h = held.input;
    }
    for (size_t b = stage_.first_block; b < stage_.end_block; ++b)
      h = stage_.model->h[b]->as<speedlabs::gpt::Block>()->forward(h);
    if (stage_.last()) {
      const auto logits = torch::nn::functional::linear(stage_.model->ln_f->forward(h), stage_.model->wte->weight);
      held.output = torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}), y_[m].reshape({-1})) / m_;
      trace.loss += held.output.item<double>();
    } else {
      held.output = h;
    }
    trace.times.push_back(now_ns());  // the compute ends; posting the message is the pipeline's cost, idle here
    if (!stage_.last()) send(h, stage_.index + 1, m);
    held_[m] = std::move(held);
  }

  void backward(int m, StepTrace& trace) {
    InFlight held = std::move(held_.at(m));
    held_.erase(m);
    if (stage_.last()) {
      trace.times.push_back(now_ns());
      held.output.backward();
    } else {
      const auto grad = receive(stage_.index + 1, kGradientTag + m);
      trace.times.push_back(now_ns());
      held.output.backward(grad);
    }
    trace.times.push_back(now_ns());
    if (!stage_.first()) send(held.input.grad(), stage_.index - 1, kGradientTag + m);
  }

  Stage& stage_;
  std::vector<torch::Tensor> x_, y_;
  int m_;
  std::map<int, InFlight> held_;
  std::vector<torch::Tensor> sending_;
  std::vector<MPI_Request> requests_;
};

Stage make_stage(const Job& job, int rank, int workers) {
  Stage stage;
  torch::manual_seed(job.seed);
  stage.model = GPT(model_config(job));
  stage.index = rank;
  stage.count = workers;
  const size_t per_stage = static_cast<size_t>(job.n_layer) / workers;
  stage.first_block = rank * per_stage;
  stage.end_block = stage.first_block + per_stage;
  return stage;
}

// The tied embedding: stage 0 holds its lookup's gradient, the last stage its head's; both need the sum.
// Every worker takes part (the middle stages with zeros), so one all-reduce on the job's communicator does it.
void sum_tied_embedding(Stage& stage, speedlabs::workers::MpiCommunicator& comm) {
  const auto& wte = stage.model->wte->weight;
  auto grad = (stage.first() || stage.last()) && wte.grad().defined() ? wte.grad().contiguous().clone()
                                                                      : torch::zeros_like(wte);
  comm.allreduce_sum(grad);
  if (stage.first() || stage.last()) wte.mutable_grad() = grad;
}

// Trains job.steps steps with @p schedule and @p micro_batches; returns rank 0's record of the run.
nlohmann::json train_run(const Job& job, const std::string& schedule, int micro_batches,
                         const std::vector<int32_t>& tokens, speedlabs::workers::MpiCommunicator& comm) {
  Stage stage = make_stage(job, comm.rank(), comm.size());
  auto optimizer = make_optimizer(stage.parameters(), job.lr);
  datasets::DataLoaderLite loader(tokens, job.batch, job.seq);
  const auto ops = schedule_for(schedule, stage.index, stage.count, micro_batches);
  nlohmann::json run{{"schedule", schedule}, {"micro_batches", micro_batches}};
  for (int step = 0; step < job.steps; ++step) {
    const auto batch = loader.next_batch();
    MPI_Barrier(MPI_COMM_WORLD);
    StageRunner runner(stage, batch.x, batch.y, micro_batches);
    const StepTrace trace = runner.run(ops);
    sum_tied_embedding(stage, comm);
    optimizer.step();
    optimizer.zero_grad();
    const double loss = comm.sum(stage.last() ? trace.loss : 0.0);
    const auto times = comm.all_gather(trace.times);  // every stage's, rank after rank
    const auto held = comm.all_gather({trace.most_in_flight, trace.activation_bytes});
    run["losses"].push_back(loss);
    run["times"].push_back(times);
    run["most_in_flight"].push_back(held);
  }
  if (comm.rank() == 0) {
    std::cout << "  pp " << comm.size() << " stages  " << schedule << "  M=" << micro_batches << " | loss "
              << run["losses"].back().get<double>() << std::endl;
  }
  return run;
}

}  // namespace

nlohmann::json train_pipeline(const Job& job, speedlabs::workers::Engine& engine) {
  auto& comm = engine.control;
  if (job.n_layer % comm.size() != 0) {
    throw speedlabs::UsageError(std::to_string(comm.size()) + " stages do not divide the " +
                                std::to_string(job.n_layer) + " blocks");
  }
  const auto tokens = shakespeare_bytes(job.data_dir);
  nlohmann::json runs = nlohmann::json::array();
  for (const std::string& schedule : job.schedules) {
    for (int m : job.micro_batches) {
      if (m < 1 || job.batch % m != 0) {
        throw speedlabs::UsageError(std::to_string(m) + " micro-batches do not split the batch of " +
                                    std::to_string(job.batch));
      }
      runs.push_back(train_run(job, schedule, m, tokens, comm));
    }
  }
  return {{"runs", runs}, {"stages", comm.size()}};
}

}  // namespace lab14
