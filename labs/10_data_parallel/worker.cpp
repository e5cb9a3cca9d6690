#include "worker.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iomanip>
#include <iostream>

#include "buckets.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/format.h"
#include "common/gpt.h"
#include "datasets/data_files.h"
#include "datasets/data_loader.h"
#include "datasets/token_cache.h"
#include "exercise.h"
#include "heartbeat.h"
#include "mpi_communicator.h"
#ifdef SPEEDLABS_LAB10_NCCL  // defined only against a CUDA libtorch with NCCL (CMakeLists.txt)
#include "nccl_communicator.h"
#endif

namespace lab10 {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Faults, kill_rank, kill_step, stop_rank, stop_step, bigger_model_rank,
                                   claimed_workers)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(JobSpec, model, batch, seq, steps, lr, seed, bucket_mb, modes, micro_batches,
                                   expect_workers, device, data_dir, out_path, log_every, faults)

nlohmann::json to_json(const JobSpec& spec) { return spec; }

JobSpec job_spec_from_json(const nlohmann::json& json) {
  try {
    return json.get<JobSpec>();
  } catch (const nlohmann::json::exception& e) {
    throw speedlabs::UsageError(std::string("a worker's job description is not valid: ") + e.what());
  }
}

namespace {

using speedlabs::fixed;
using speedlabs::gpt::GPT;
using Clock = std::chrono::steady_clock;

// What one mode measured on this worker, step by step (losses are the global batch's).
struct Trace {
  std::vector<double> losses, step_ms, comm_ms;
  std::vector<bool> in_sync;
};

speedlabs::gpt::GPTConfig model_config(const JobSpec& spec, int rank) {
  auto config = speedlabs::gpt::GPTConfig::by_name(spec.model);
  if (rank == spec.faults.bigger_model_rank) config.n_layer += 1;
  return config;
}

void print_step(const std::string& mode, int step, double loss, double step_ms, double comm_ms) {
  std::cout << "  " << std::left << std::setw(9) << mode << std::right << "step " << std::setw(3) << step << " | loss "
            << fixed(loss, 6) << " | " << std::setw(8) << fixed(step_ms, 1) << " ms/step | " << std::setw(7)
            << fixed(comm_ms, 1) << " ms in all-reduce" << std::endl;
}

// Where a worker trains and how its gradients travel: this CPU and MPI, or its own GPU and NCCL.
struct Engine {
  torch::Device device;
  Communicator& gradients;  // the MPI communicator itself on a CPU
};

// Trains spec.steps steps in @p mode from the seed's weights, every worker on its rows of each batch.
// @p comm carries the control messages (losses, checksums), engine.gradients the gradients.
Trace train(const JobSpec& spec, const std::string& mode, MpiCommunicator& comm, const Engine& engine,
            const std::vector<int32_t>& tokens) {
  const int workers = comm.size();
  const int64_t rows = spec.batch / workers;
  torch::manual_seed(spec.seed);
  GPT model(model_config(spec, comm.rank()));
  check_workers_agree(spec.expect_workers, spec.batch, spec.seq, model, comm);
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
    if (comm.rank() == spec.faults.kill_rank && step == spec.faults.kill_step) std::raise(SIGKILL);
    if (comm.rank() == spec.faults.stop_rank && step == spec.faults.stop_step) std::raise(SIGSTOP);
    const auto batch = loader.next_batch();
    const auto x = batch.x.narrow(0, comm.rank() * rows, rows).to(engine.device);
    const auto y = batch.y.narrow(0, comm.rank() * rows, rows).to(engine.device);

    comm.take_mpi_seconds();
    const auto start = Clock::now();
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
    finish_queued_work(engine.device);
    trace.step_ms.push_back(ms_since(start));
    trace.comm_ms.push_back(comm.take_mpi_seconds() * 1000);

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
nlohmann::json accumulation_check(const JobSpec& spec, const std::vector<int32_t>& tokens) {
  torch::manual_seed(spec.seed);
  GPT model(model_config(spec, 0));
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

nlohmann::json run_modes(const JobSpec& spec, MpiCommunicator& comm, const Engine& engine) {
  const auto tokens = datasets::load_shakespeare_tokens(spec.data_dir).ids;
  nlohmann::json result{{"workers", comm.size()}};
  for (const auto& mode : spec.modes) {
    if (mode != "single" && mode != "naive" && mode != "bucketed") {
      throw speedlabs::UsageError("unknown mode '" + mode + "'");
    }
    const Trace trace = train(spec, mode, comm, engine, tokens);
    result["modes"][mode] = {
        {"losses", trace.losses}, {"step_ms", trace.step_ms}, {"comm_ms", trace.comm_ms}, {"in_sync", trace.in_sync}};
  }
  torch::manual_seed(spec.seed);
  GPT model(model_config(spec, comm.rank()));
  const int64_t parameters = speedlabs::gpt::parameter_count(model);
  result["parameters"] = parameters;
  result["buckets"] = make_gradient_buckets(model->parameters(), bucket_bytes(spec.bucket_mb), comm).buckets.size();
  if (comm.size() > 1) result["allreduce"] = allreduce_benchmark(parameters, engine);
  if (spec.micro_batches > 0 && comm.rank() == 0) result["accumulation"] = accumulation_check(spec, tokens);
  return result;
}

nlohmann::json run_job(const JobSpec& spec, MpiCommunicator& comm) {
  if (spec.batch % comm.size() != 0) {
    throw speedlabs::UsageError("the global batch " + std::to_string(spec.batch) + " does not split evenly over " +
                                std::to_string(comm.size()) + " workers");
  }
  if (spec.device == "cpu") return run_modes(spec, comm, Engine{torch::Device(torch::kCPU), comm});
#ifdef SPEEDLABS_LAB10_NCCL
  if (spec.device == "cuda") {
    const torch::Device gpu = NcclCommunicator::use_local_gpu(comm.local_rank());
    NcclCommunicator nccl(comm);
    return run_modes(spec, comm, Engine{gpu, nccl});
  }
#endif
  throw speedlabs::UsageError("no gradient engine for device '" + spec.device + "' in this build (cpu: MPI; cuda: " +
                              "NCCL, built only against a CUDA libtorch with NCCL's header)");
}

}  // namespace

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

void finish_queued_work(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

uint64_t weights_checksum(const std::vector<torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  uint64_t checksum = 0;
  for (const auto& p : tensors) {
    const auto bits = p.detach().contiguous().view(torch::kInt32).to(torch::kInt64).flatten();
    const auto position = torch::arange(bits.numel(), bits.options()).remainder(64) + 1;
    checksum = checksum * 1000003u + static_cast<uint64_t>((bits * position).sum().item<int64_t>());
  }
  return checksum;
}

void check_workers_agree(int expect_workers, int64_t batch, int64_t seq, GPT& model, MpiCommunicator& comm) {
  if (comm.size() != expect_workers) {
    throw speedlabs::UsageError("world size mismatch: mpirun started " + std::to_string(comm.size()) +
                                " workers, the job was set up for " + std::to_string(expect_workers));
  }
  int64_t shape_hash = 0;
  for (const auto& p : model->parameters()) {
    for (int64_t size : p.sizes()) shape_hash = shape_hash * 31 + size;
    shape_hash = shape_hash * 17 + p.dim();
  }
  const std::vector<int64_t> mine{speedlabs::gpt::parameter_count(model),
                                  static_cast<int64_t>(model->parameters().size()), shape_hash, batch, seq};
  const auto all = comm.all_gather(mine);
  for (int r = 1; r < comm.size(); ++r) {
    const int64_t* theirs = &all[r * mine.size()];
    if (!std::equal(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(mine.size()), theirs)) {
      throw speedlabs::UsageError("model shape mismatch at start: rank " + std::to_string(r) + " has " +
                                  std::to_string(theirs[0]) + " parameters in " + std::to_string(theirs[1]) +
                                  " tensors (shape hash " + std::to_string(theirs[2]) + "), rank 0 has " +
                                  std::to_string(all[0]) + " in " + std::to_string(all[1]) + " (shape hash " +
                                  std::to_string(all[2]) + "); every worker must build the same model");
    }
  }
}

int run_mpi_worker(int argc, char** argv, const std::string& who, const std::function<void(MpiCommunicator&)>& job) {
  MpiCommunicator comm(&argc, &argv);
  torch::set_num_threads(1);  // one intra-op thread per worker: the workers are the parallelism
  const Heartbeat heartbeat(comm.rank());
  int code = speedlabs::kExitRuntime;
  std::string why;
  try {
    job(comm);
    return 0;
  } catch (const speedlabs::UsageError& e) {
    why = std::string("error: ") + e.what();
    code = speedlabs::kExitUsage;
  } catch (const speedlabs::NotImplementedError& e) {
    why = e.what();
    code = speedlabs::kExitNotImplemented;
  } catch (const c10::Error& e) {
    why = std::string("libtorch error: ") + e.what_without_backtrace();
  } catch (const std::exception& e) {
    why = std::string("error: ") + e.what();
  }
  // One write of the whole line: stderr is unbuffered, and piece by piece another process's output (here
  // mpirun's abort banner) can land inside it, so that the launcher cannot find the worker's message.
  const std::string line = who + " " + std::to_string(comm.rank()) + ": " + why + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  comm.abort(code);  // the other workers may be waiting in a collective: end them all, now
}

int worker_main(int argc, char** argv, const std::string& spec_text) {
  return run_mpi_worker(argc, argv, "lab10 worker", [&](MpiCommunicator& comm) {
    const JobSpec spec = job_spec_from_json(nlohmann::json::parse(spec_text));
    const auto result = run_job(spec, comm);
    if (comm.rank() == 0) speedlabs::write_file_atomically(spec.out_path, result.dump(1) + "\n");
  });
}

}  // namespace lab10
