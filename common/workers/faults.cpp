#include "common/workers/faults.h"

#include <csignal>

namespace speedlabs::workers {

void FaultPlan::strike_at_step(int rank, int step) const {
  if (rank == kill_rank && step == kill_step) std::raise(SIGKILL);
  if (rank == stop_rank && step == stop_step) std::raise(SIGSTOP);
}

gpt::GPTConfig FaultPlan::model_for(int rank, gpt::GPTConfig config) const {
  if (rank == bigger_model_rank) config.n_layer += 1;
  return config;
}

}  // namespace speedlabs::workers
