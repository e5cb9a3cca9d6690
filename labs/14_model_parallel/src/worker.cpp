#include "worker.h"

#include <fstream>
#include <iostream>
#include <iterator>

#include "common/errors.h"
#include "common/host_memory.h"
#include "common/workers/harness.h"
#include "datasets/data_files.h"
#include "datasets/data_loader.h"
#include "optimizer.h"
#include "pipeline.h"
#include "tensor_parallel.h"

namespace lab14 {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Job, kind, n_layer, n_head, n_embd, batch, seq, steps, lr, seed, micro_batches,
                                   schedules, data_dir)

nlohmann::json to_json(const Job& job) { return job; }

speedlabs::gpt::GPTConfig model_config(const Job& job) {
  auto config = speedlabs::gpt::GPTConfig::tiny();
  config.vocab_size = 256;
  config.n_layer = job.n_layer;
  config.n_head = job.n_head;
  config.n_embd = job.n_embd;
  config.require_sequence_fits(job.seq, "--seq");
  return config;
}

std::vector<int32_t> shakespeare_bytes(const std::string& data_dir) {
  const auto path = datasets::require_file(datasets::resolve_data_dir(data_dir), datasets::kShakespearePath);
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<int32_t> ids(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) ids[i] = static_cast<unsigned char>(bytes[i]);
  return ids;
}

torch::optim::AdamW make_optimizer(const std::vector<torch::Tensor>& params, double lr) {
  return torch::optim::AdamW(params, torch::optim::AdamWOptions(lr).betas({0.9, 0.999}).eps(1e-8).weight_decay(0.01));
}

namespace {

// One worker, the whole model and the whole batch: the losses every split must give again.
nlohmann::json train_reference(const Job& job) {
  const auto tokens = shakespeare_bytes(job.data_dir);
  torch::manual_seed(job.seed);
  speedlabs::gpt::GPT model(model_config(job));
  auto optimizer = make_optimizer(model->parameters(), job.lr);
  datasets::DataLoaderLite loader(tokens, job.batch, job.seq);
  std::vector<double> losses;
  for (int step = 0; step < job.steps; ++step) {
    const auto batch = loader.next_batch();
    const auto loss = model->forward(batch.x, batch.y).loss;
    loss.backward();
    optimizer.step();
    optimizer.zero_grad();
    losses.push_back(loss.item<double>());
  }
  std::cout << "  1 worker  " << job.steps << " steps | last loss " << losses.back() << std::endl;
  return {{"losses", losses}, {"parameters", speedlabs::gpt::parameter_count(model)}};
}

nlohmann::json run_job(const Job& job, speedlabs::workers::Engine& engine) {
  if (!engine.device.is_cpu()) throw speedlabs::UsageError("lab 14's workers train on the CPU (MPI)");
  if (job.kind == "reference") return train_reference(job);
  if (job.kind == "tp") return train_tensor_parallel(job, engine);
  if (job.kind == "pp") return train_pipeline(job, engine);
  throw speedlabs::UsageError("unknown job kind '" + job.kind + "'");
}

}  // namespace

int worker_main(int argc, char** argv, const std::string& envelope_text) {
  speedlabs::install_host_memory_counter();  // before any tensor: every CPU tensor of the worker is counted
  return speedlabs::workers::run_mpi_worker(argc, argv, "lab14 worker", envelope_text,
                                            [](const nlohmann::json& job, speedlabs::workers::Engine& engine) {
                                              return run_job(speedlabs::workers::job_from_json<Job>(job), engine);
                                            });
}

}  // namespace lab14
