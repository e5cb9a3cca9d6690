#include "zero.h"

#include <torch/torch.h>

#include <iomanip>
#include <iostream>
#include <optional>
#include <thread>

#include "common/errors.h"
#include "common/format.h"
#include "common/gpt.h"
#include "common/host_memory.h"
#include "common/workers/harness.h"
#include "datasets/data_files.h"
#include "datasets/data_loader.h"
#include "datasets/token_cache.h"

namespace lab11 {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Job, model, batch, seq, steps, lr, seed, stages, data_dir)

nlohmann::json to_json(const Job& job) { return job; }

void allocate_full_storage(const torch::Tensor& full) {
  c10::StorageImpl* storage = full.storage().unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>(full.numel()) * full.element_size();
  if (storage->nbytes() == bytes && storage->data_ptr().get() != nullptr) return;
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
}

void release_full_storage(const torch::Tensor& full) {
  c10::StorageImpl* storage = full.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, storage->device()));
  storage->set_nbytes(0);
}

bool has_full_storage(const torch::Tensor& full) {
  return full.storage().nbytes() > 0 && full.storage().data_ptr().get() != nullptr;
}

std::vector<FlatUnit> make_units(speedlabs::gpt::GPT& model, int rank, int workers) {
  torch::NoGradGuard no_grad;
  std::vector<std::vector<torch::Tensor>> groups{
      {model->wte->weight, model->wpe->weight, model->ln_f->weight, model->ln_f->bias}};
  for (const auto& block : *model->h) groups.push_back(block->parameters());
  std::vector<FlatUnit> units;
  int64_t covered = 0;
  for (const auto& params : groups) {
    FlatUnit unit;
    unit.rank = rank;
    unit.params = params;
    int64_t numel = 0;
    for (const auto& p : params) {
      unit.offsets.push_back(numel);
      numel += p.numel();
    }
    covered += numel;
    unit.range = shard_range(numel, rank, workers);
    unit.full = torch::zeros({unit.range.padded}, torch::TensorOptions(torch::kFloat).device(params[0].device()));
    for (size_t i = 0; i < params.size(); ++i) {
      auto slice = unit.full.narrow(0, unit.offsets[i], params[i].numel());
      slice.copy_(params[i].reshape(-1));
      unit.params[i].set_data(slice.view(params[i].sizes()));  // the same leaf, now a view of the unit
    }
    unit.shard = unit.full.narrow(0, unit.range.begin, unit.range.shard_size);
    units.push_back(std::move(unit));
  }
  if (covered != speedlabs::gpt::parameter_count(model)) {
    throw speedlabs::RuntimeFailure("the flat units hold " + std::to_string(covered) + " of the model's " +
                                    std::to_string(speedlabs::gpt::parameter_count(model)) + " parameters");
  }
  return units;
}

namespace {

using speedlabs::fixed;
using speedlabs::gpt::GPT;
using speedlabs::workers::Engine;

int64_t live_bytes() { return speedlabs::host_memory_stats().live_bytes; }

// One step's forward and backward a unit at a time, the way sharded training runs it: every block's input is
// cut from the graph before it (a leaf that requires grad), so that backward can go a block at a time, with
// that block's weights gathered (stage 3) and its gradient reduce-scattered as soon as it is complete (stages
// 2 and 3). Returns this worker's loss; leaves in @p grads each unit's gradient averaged over the workers:
// the whole padded unit at stages 0 and 1 (all-reduced after backward), this worker's shard at stages 2 and 3.
double forward_backward(GPT& model, std::vector<FlatUnit>& units, int stage, Communicator& comm, const torch::Tensor& x,
                        const torch::Tensor& y, std::vector<torch::Tensor>& grads) {
  const int workers = comm.size();
  FlatUnit& root = units[0];  // wte (also the LM head), wpe, ln_f
  const auto gather = [&](FlatUnit& unit) {
    if (stage == 3) gather_full_parameters(unit, comm);
  };
  const auto release = [&](FlatUnit& unit) {
    if (stage == 3) free_full_parameters(unit);
  };
  grads.assign(units.size(), torch::Tensor());
  const auto add_gradients = [&](size_t u, const std::vector<size_t>& which, const std::vector<torch::Tensor>& g) {
    if (!grads[u].defined()) grads[u] = torch::zeros({units[u].range.padded}, units[u].shard.options());
    for (size_t i = 0; i < which.size(); ++i) {
      grads[u].narrow(0, units[u].offsets[which[i]], g[i].numel()).add_(g[i].reshape(-1));
    }
  };
  const auto unit_complete = [&](size_t u) {  // stages 2 and 3: keep only this worker's shard of the sum
    if (stage < 2) return;
    auto shard = torch::empty({units[u].range.shard_size}, grads[u].options());
    comm.reduce_scatter_sum(grads[u], shard);
    grads[u] = shard.div_(workers);  // the full gradient is freed here
  };

  gather(root);
  const auto positions = torch::arange(x.size(1), x.options());
  const auto embedded = model->wte->forward(x) + model->wpe->forward(positions);
  release(root);  // the embeddings' backward needs the token ids, not the weights
  std::vector<torch::Tensor> inputs, outputs;
  auto h = embedded.detach().requires_grad_();
  for (size_t b = 0; b < model->h->size(); ++b) {
    gather(units[1 + b]);
    inputs.push_back(h);
    outputs.push_back(model->h[b]->as<speedlabs::gpt::Block>()->forward(h));
    release(units[1 + b]);
    h = outputs.back().detach().requires_grad_();
  }
  gather(root);
  double loss_value = 0;
  {
    const auto logits = torch::nn::functional::linear(model->ln_f->forward(h), model->wte->weight);
    const auto loss = torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}), y.view({-1}));
    loss_value = loss.item<double>();
    auto g = torch::autograd::grad({loss}, {h, root.params[0], root.params[2], root.params[3]});
    release(root);
    add_gradients(0, {0, 2, 3}, {g[1], g[2], g[3]});
    h = g[0];  // from here on: the gradient of the loss with respect to the current block's output
  }
  for (size_t b = model->h->size(); b-- > 0;) {
    FlatUnit& unit = units[1 + b];
    gather(unit);
    std::vector<torch::Tensor> wrt{inputs[b]};
    wrt.insert(wrt.end(), unit.params.begin(), unit.params.end());
    auto g = torch::autograd::grad({outputs[b]}, wrt, {h});
    release(unit);
    inputs[b] = outputs[b] = torch::Tensor();  // the block's graph and activations go
    h = g[0];
    std::vector<size_t> all(unit.params.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    add_gradients(1 + b, all, std::vector<torch::Tensor>(g.begin() + 1, g.end()));
    unit_complete(1 + b);
  }
  const auto g = torch::autograd::grad({embedded}, {root.params[0], root.params[1]}, {h});
  add_gradients(0, {0, 1}, g);
  unit_complete(0);
  if (stage < 2) {
    for (auto& grad : grads) {
      comm.allreduce_sum(grad);
      grad.div_(workers);
    }
  }
  return loss_value;
}

// What one stage measured on this worker.
struct StageTrace {
  std::vector<double> losses, step_ms, comm_ms, bytes_sent;
  std::vector<bool> in_sync;
  nlohmann::json memory;
};

// The optimizer's step with this worker's averaged gradients @p grads: at stage 0 lab 10's data parallel
// (libtorch's AdamW on every weight), at stages 1-3 the sharded AdamW on this worker's shard of each unit.
void optimizer_step(GPT& model, std::vector<FlatUnit>& units, int stage, const std::vector<torch::Tensor>& grads,
                    std::optional<torch::optim::AdamW>& adamw, std::vector<AdamWShard>& states,
                    const AdamWSettings& settings, Communicator& engine) {
  torch::NoGradGuard no_grad;
  for (size_t u = 0; u < units.size(); ++u) {
    FlatUnit& unit = units[u];
    if (stage == 0) {  // lab 10's data parallel: libtorch's AdamW on every weight, with the averaged gradient
      for (size_t i = 0; i < unit.params.size(); ++i) {
        unit.params[i].mutable_grad() =
            grads[u].narrow(0, unit.offsets[i], unit.params[i].numel()).view(unit.params[i].sizes());
      }
      continue;
    }
    const auto grad_shard = stage == 1 ? grads[u].narrow(0, unit.range.begin, unit.range.shard_size) : grads[u];
    sharded_adamw_step(unit.shard, grad_shard, states[u], settings);
    if (stage < 3) engine.all_gather_into(unit.full);  // every worker's updated shard, to every worker
  }
  if (stage == 0) {
    adamw->step();
    for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();  // the gradient buffers go with grads
  }
}

void print_step(int stage, int step, const StageTrace& trace) {
  std::cout << "  " << (stage < 0 ? std::string("1 worker") : "stage " + std::to_string(stage)) << "  step "
            << std::setw(3) << step << " | loss " << fixed(trace.losses.back(), 6) << " | " << std::setw(8)
            << fixed(trace.step_ms.back(), 1) << " ms/step | " << std::setw(10)
            << fixed(trace.bytes_sent.back() / 1e6, 2) << " MB sent" << std::endl;
}

// The bytes this worker held, by kind; the activations and transients are what the peak holds beyond the rest.
nlohmann::json memory_record(int64_t parameters_at_rest, int64_t gradients, int64_t optimizer_state, int64_t peak) {
  return {{"parameters_at_rest", parameters_at_rest},
          {"gradients", gradients},
          {"optimizer_state", optimizer_state},
          {"peak", peak},
          {"activations_and_transients", peak - parameters_at_rest - optimizer_state - gradients}};
}

// This worker's flat units at @p stage (none for the plain reference, -1); at rest a stage 3 worker keeps its
// shard alone.
std::vector<FlatUnit> units_at_rest(GPT& model, int stage, int rank, int workers) {
  std::vector<FlatUnit> units;
  if (stage >= 0) units = make_units(model, rank, workers);
  if (stage == 3) {
    for (FlatUnit& unit : units) {
      unit.shard = unit.shard.clone();
      free_full_parameters(unit);
    }
  }
  return units;
}

// Measurement, outside the timed step: the global batch's loss, and whether the weights agree.
void record_loss_and_sync(GPT& model, int stage, double loss, speedlabs::workers::MpiCommunicator& comm,
                          StageTrace& trace) {
  trace.losses.push_back(comm.sum(loss) / comm.size());
  if (stage < 3) {
    const auto [low, high] = comm.min_max(speedlabs::workers::weights_checksum(model->parameters()));
    trace.in_sync.push_back(low == high);
  }
}

// Trains job.steps steps at @p stage (-1: one worker's plain training, the reference) from the seed's weights.
StageTrace train(const Job& job, int stage, const Engine& engine, const std::vector<int32_t>& tokens) {
  auto& comm = engine.control;
  const torch::Device device = engine.device;
  const int workers = comm.size(), rank = comm.rank();
  const int64_t rows = speedlabs::workers::rows_per_worker(job.batch, workers);
  const int64_t base = live_bytes();
  torch::manual_seed(job.seed);
  GPT model(engine.model_config(job.model));
  speedlabs::workers::check_workers_agree(job.batch, job.seq, model, comm);
  model->to(device);
  std::vector<FlatUnit> units = units_at_rest(model, stage, rank, workers);
  std::optional<torch::optim::AdamW> adamw;
  if (stage <= 0) adamw.emplace(speedlabs::gpt::make_adamw(model, job.lr));
  const int64_t parameters_at_rest = live_bytes() - base;
  std::vector<AdamWShard> states(units.size());
  AdamWSettings settings;
  settings.lr = job.lr;
  datasets::DataLoaderLite loader(tokens, job.batch, job.seq);
  StageTrace trace;
  std::vector<int64_t> rest, gradients, peak;
  for (int step = 0; step < job.steps; ++step) {
    const auto batch = loader.next_batch();
    const auto x = batch.x.narrow(0, rank * rows, rows).to(device);
    const auto y = batch.y.narrow(0, rank * rows, rows).to(device);
    rest.push_back(live_bytes());
    speedlabs::reset_host_memory_peak();
    const int64_t sent_before = engine.gradients.bytes_sent();
    const auto clock = engine.start_step(step);
    double loss = 0;
    if (stage < 0) {
      const auto l = model->forward(x, y).loss;
      l.backward();
      loss = l.item<double>();
      gradients.push_back(live_bytes() - rest.back());
      adamw->step();
      adamw->zero_grad();
    } else {
      std::vector<torch::Tensor> grads;
      loss = forward_backward(model, units, stage, engine.gradients, x, y, grads);
      gradients.push_back(live_bytes() - rest.back());
      optimizer_step(model, units, stage, grads, adamw, states, settings, engine.gradients);
    }
    const auto time = clock.stop();
    trace.step_ms.push_back(time.ms);
    trace.comm_ms.push_back(time.comm_ms);
    trace.bytes_sent.push_back(static_cast<double>(engine.gradients.bytes_sent() - sent_before));
    peak.push_back(speedlabs::host_memory_stats().peak_bytes - base);

    record_loss_and_sync(model, stage, loss, comm, trace);
    if (rank == 0 && (step % 5 == 0 || step == job.steps - 1)) print_step(stage, step, trace);
  }
  if (device.is_cpu() && job.steps >= 2) {
    const int64_t optimizer_state = rest[1] - rest[0];  // at rest after the first step, less before it
    trace.memory = memory_record(parameters_at_rest, gradients.back(), optimizer_state, peak.back());
  }
  return trace;
}

nlohmann::json run_stages(const Job& job, const Engine& engine) {
  auto& comm = engine.control;
  const auto tokens = datasets::load_shakespeare_tokens(job.data_dir).ids;
  nlohmann::json result{{"workers", comm.size()}, {"cores", std::thread::hardware_concurrency()}};
  for (int stage : job.stages) {
    if (stage < -1 || stage > 3) throw speedlabs::UsageError("unknown stage " + std::to_string(stage));
    const StageTrace trace = train(job, stage, engine, tokens);
    result["stages"][std::to_string(stage)] = {{"losses", trace.losses},         {"step_ms", trace.step_ms},
                                               {"comm_ms", trace.comm_ms},       {"in_sync", trace.in_sync},
                                               {"bytes_sent", trace.bytes_sent}, {"memory", trace.memory}};
  }
  torch::manual_seed(job.seed);
  GPT model(speedlabs::gpt::GPTConfig::by_name(job.model));
  result["parameters"] = speedlabs::gpt::parameter_count(model);
  nlohmann::json units = nlohmann::json::array();
  for (const FlatUnit& unit : make_units(model, comm.rank(), comm.size())) units.push_back(unit.range.padded);
  result["unit_padded_elements"] = units;  // unit 0: embeddings and ln_f; then one per block
  return result;
}

}  // namespace

int worker_main(int argc, char** argv, const std::string& envelope_text) {
  speedlabs::install_host_memory_counter();  // before any tensor: every CPU tensor of the worker is counted
  return speedlabs::workers::run_mpi_worker(argc, argv, "lab11 worker", envelope_text,
                                            [](const nlohmann::json& job, Engine& engine) {
                                              return run_stages(speedlabs::workers::job_from_json<Job>(job), engine);
                                            });
}

}  // namespace lab11
