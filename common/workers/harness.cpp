#include "common/workers/harness.h"

#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <cstdio>

#include "common/errors.h"
#include "common/files.h"
#include "common/workers/heartbeat.h"
#ifdef SPEEDLABS_NCCL  // defined only against a CUDA libtorch with NCCL (CMakeLists.txt)
#include "common/workers/nccl_communicator.h"
#endif

namespace speedlabs::workers {

namespace {

// What the launcher wrote after --worker (launch_mpi_job).
struct Envelope {
  nlohmann::json job;  // the lab's own part
  std::string device;  // "cpu" or "cuda"
  int workers = 0;     // the world size the launcher started (or a test's claimed one)
  FaultPlan faults;
  std::string out_path;  // rank 0 writes its result here
};

Envelope read_envelope(const std::string& text) {
  try {
    const auto json = nlohmann::json::parse(text);
    return {json.at("job"), json.at("device").get<std::string>(), json.at("workers").get<int>(),
            json.at("faults").get<FaultPlan>(), json.at("out_path").get<std::string>()};
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(std::string("a worker's job description is not valid: ") + e.what());
  }
}

void check_world_size(int expect_workers, const MpiCommunicator& comm) {
  if (comm.size() != expect_workers) {
    throw UsageError("world size mismatch: mpirun started " + std::to_string(comm.size()) +
                     " workers, the job was set up for " + std::to_string(expect_workers));
  }
}

// The job on the envelope's device: this CPU with MPI's collectives, or this worker's GPU with NCCL's.
nlohmann::json run_on_device(const Envelope& envelope, MpiCommunicator& comm, const Job& job) {
  if (envelope.device == "cpu") {
    Engine engine{comm, comm, torch::Device(torch::kCPU), envelope.faults};
    return job(envelope.job, engine);
  }
#ifdef SPEEDLABS_NCCL
  if (envelope.device == "cuda") {
    const torch::Device gpu = NcclCommunicator::use_local_gpu(comm.local_rank());
    NcclCommunicator nccl(comm);
    Engine engine{comm, nccl, gpu, envelope.faults};
    return job(envelope.job, engine);
  }
#endif
  throw UsageError("no gradient engine for device '" + envelope.device + "' in this build (cpu: MPI; cuda: " +
                   "NCCL, built only against a CUDA libtorch with NCCL's header)");
}

}  // namespace

StepClock::StepClock(MpiCommunicator& control, const torch::Device& device) : control_(control), device_(device) {
  control_.take_mpi_seconds();  // from here on
  start_ = std::chrono::steady_clock::now();
}

StepClock::Time StepClock::stop() const {
  finish_queued_work(device_);
  return {ms_since(start_), control_.take_mpi_seconds() * 1000};
}

gpt::GPTConfig Engine::model_config(const std::string& preset) const {
  return faults.model_for(control.rank(), gpt::GPTConfig::by_name(preset));
}

StepClock Engine::start_step(int step) const {
  faults.strike_at_step(control.rank(), step);
  return StepClock(control, device);
}

int64_t rows_per_worker(int64_t batch, int workers) {
  if (batch % workers != 0) {
    throw UsageError("the global batch " + std::to_string(batch) + " does not split evenly over " +
                     std::to_string(workers) + " workers");
  }
  return batch / workers;
}

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

void check_workers_agree(int64_t batch, int64_t seq, gpt::GPT& model, MpiCommunicator& comm) {
  int64_t shape_hash = 0;
  for (const auto& p : model->parameters()) {
    for (int64_t size : p.sizes()) shape_hash = shape_hash * 31 + size;
    shape_hash = shape_hash * 17 + p.dim();
  }
  const std::vector<int64_t> mine{gpt::parameter_count(model), static_cast<int64_t>(model->parameters().size()),
                                  shape_hash, batch, seq};
  const auto all = comm.all_gather(mine);
  for (int r = 1; r < comm.size(); ++r) {
    const int64_t* theirs = &all[r * mine.size()];
    if (!std::equal(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(mine.size()), theirs)) {
      throw UsageError("model shape mismatch at start: rank " + std::to_string(r) + " has " +
                       std::to_string(theirs[0]) + " parameters in " + std::to_string(theirs[1]) +
                       " tensors (shape hash " + std::to_string(theirs[2]) + "), rank 0 has " + std::to_string(all[0]) +
                       " in " + std::to_string(all[1]) + " (shape hash " + std::to_string(all[2]) +
                       "); every worker must build the same model");
    }
  }
}

int run_mpi_worker(int argc, char** argv, const std::string& who, const std::string& envelope_text, const Job& job) {
  MpiCommunicator comm(&argc, &argv);
  torch::set_num_threads(1);  // one intra-op thread per worker: the workers are the parallelism
  const Heartbeat heartbeat(comm.rank());
  int code = kExitRuntime;
  std::string why;
  try {
    const Envelope envelope = read_envelope(envelope_text);
    check_world_size(envelope.workers, comm);
    const auto result = run_on_device(envelope, comm, job);
    if (comm.rank() == 0) write_file_atomically(envelope.out_path, result.dump(1) + "\n");
    return 0;
  } catch (const UsageError& e) {
    why = std::string("error: ") + e.what();
    code = kExitUsage;
  } catch (const NotImplementedError& e) {
    why = e.what();
    code = kExitNotImplemented;
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

}  // namespace speedlabs::workers
