/// @file labs/11_sharding/zero.h
/// @brief What every lab 11 worker runs: the tiny GPT-2 trained at ZeRO stage 0, 1, 2 or 3 on the workers' engine,
/// with its memory counted by lab 08's counting allocator and its bytes by the communicator.
///
/// The launcher (experiment.h) starts the workers with launch_mpi_job (common/workers/launcher.h) and passes
/// them a Job as JSON; rank 0's measurements go back to the launcher, which judges them.
#pragma once
#include <torch/types.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "exercise.h"

namespace speedlabs::gpt {
class GPT;  // common/gpt.h: only named here, so the launcher's units compile without the nn modules
}  // namespace speedlabs::gpt

namespace lab11 {

/// Gives @p full's storage the bytes of its size again (a no-op when it has them), through the allocator
/// it was made with (the counting one): the views of it (the parameters) see the new memory at once.
/// @param full a flat tensor that owns its whole storage
void allocate_full_storage(const torch::Tensor& full);
/// Frees the bytes of @p full's storage; the tensor and its views keep their shapes, with no data behind
/// them until allocate_full_storage(). What FSDP does with `storage().resize_(0)`.
/// @param full a flat tensor that owns its whole storage
void release_full_storage(const torch::Tensor& full);
/// True when @p full's storage holds its bytes.
/// @param full a flat tensor
bool has_full_storage(const torch::Tensor& full);

/// The model's parameters moved into flat units, each padded for @p workers: unit 0 holds the token and
/// position embeddings and the final LayerNorm (the "root": used at both ends, the token embedding being
/// the tied LM head too), unit 1 + i block i. Every parameter becomes a view of its unit's `full`
/// (Tensor::set_data, the same autograd leaf); `shard` is a view of this worker's slice.
/// @param model   the model (its parameters are moved)
/// @param rank    this worker
/// @param workers N
std::vector<FlatUnit> make_units(speedlabs::gpt::GPT& model, int rank, int workers);

/// One job: what to train, at which stages, on how many workers.
struct Job {
  std::string model = "tiny";  ///< speedlabs::gpt::GPTConfig preset
  int64_t batch = 4;           ///< global batch B: every step, rank r trains on rows [r B/N, (r+1) B/N)
  int64_t seq = 16;            ///< T
  int steps = 10;              ///< training steps per stage
  double lr = 1e-3;            ///< AdamW learning rate
  uint64_t seed = 42;          ///< initial weights and batches (the same for every stage and job)
  std::vector<int> stages;     ///< -1: one worker, plain training (the reference); 0-3: ZeRO stages, in this order
  std::string data_dir;        ///< where tiny shakespeare is
};

/// The job as JSON (the job in the launcher's envelope).
/// @param job the job
nlohmann::json to_json(const Job& job);

/// A worker's main(): the workers' harness (run_mpi_worker, common/workers/harness.h) around the job's stages;
/// rank 0's result holds, per stage, the losses, step times, weights-in-sync flags, bytes sent per step and the
/// bytes of memory measured.
/// @param argc          main's argc
/// @param argv          main's argv
/// @param envelope_text the argv entry after --worker (the Job inside the launcher's envelope)
/// @return 0 (errors leave through MPI_Abort with the lab's exit code)
int worker_main(int argc, char** argv, const std::string& envelope_text);

}  // namespace lab11
