/// @file labs/14_model_parallel/src/worker.h
/// @brief What every lab 14 worker runs: one worker training the whole model (the reference), N workers
/// splitting each block's matrices (tensor parallel, tensor_parallel.h) or the run of blocks (pipeline,
/// pipeline.h), on the workers' engine (common/workers). The launcher (experiment.h) reads rank 0's result.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "common/gpt_config.h"

namespace lab14 {

/// One job of workers.
struct Job {
  std::string kind = "reference";      ///< "reference" (one worker, the whole model), "tp" or "pp"
  int64_t n_layer = 4;                 ///< blocks
  int64_t n_head = 4;                  ///< attention heads per block
  int64_t n_embd = 64;                 ///< C
  int64_t batch = 8;                   ///< B, the global batch (every worker of a TP job sees all of it)
  int64_t seq = 64;                    ///< T
  int steps = 4;                       ///< training steps per run
  double lr = 1e-3;                    ///< AdamW learning rate
  uint64_t seed = 42;                  ///< initial weights and batches
  std::vector<int> micro_batches;      ///< pp: the values of M, one run each per schedule
  std::vector<std::string> schedules;  ///< pp: "gpipe", "1f1b"
  std::string data_dir;                ///< where tiny shakespeare is
};

/// The job as JSON (the job in the launcher's envelope).
/// @param job the job
nlohmann::json to_json(const Job& job);

/// The model every worker builds first (then keeps its part): a GPT-2 block stack on tiny shakespeare's bytes
/// (256 tokens, so the tied embedding and head stay as small as a block's matrices).
/// @param job its n_layer, n_head, n_embd
speedlabs::gpt::GPTConfig model_config(const Job& job);

/// Tiny shakespeare's bytes as token ids.
/// @param data_dir where the data are
std::vector<int32_t> shakespeare_bytes(const std::string& data_dir);

/// A worker's main(): the workers' harness (run_mpi_worker) around the job; rank 0's result is written for the
/// launcher.
/// @param argc          main's argc
/// @param argv          main's argv
/// @param envelope_text the argv entry after --worker
/// @return 0 (errors leave through MPI_Abort with the lab's exit code)
int worker_main(int argc, char** argv, const std::string& envelope_text);

}  // namespace lab14
