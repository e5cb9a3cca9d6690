/// @file common/workers/faults.h
/// @brief Deliberate faults in a job of workers, for the tests of the fault handling only.
///
/// A test sets them in its lab's Config; the launcher passes them to the workers beside the job
/// (Launch::faults, which tells the workers the claimed world size), and the worker harness plants the others
/// (Engine::start_step, Engine::model_config), so a lab's own training code never sees them.
#pragma once
#include <nlohmann/json.hpp>

#include "common/gpt_config.h"

namespace speedlabs::workers {

/// The faults of one job; none by default.
struct FaultPlan {
  int kill_rank = -1;          ///< this rank kills itself (SIGKILL) at the start of step kill_step
  int kill_step = -1;          ///< the step of kill_rank's death
  int stop_rank = -1;          ///< this rank stops itself (SIGSTOP) at the start of step stop_step
  int stop_step = -1;          ///< the step at which stop_rank stops
  int bigger_model_rank = -1;  ///< this rank builds a model with one more layer (a shape mismatch)
  int claimed_workers = 0;     ///< >0: the workers are told to expect this many workers instead of the real count

  /// At the start of step @p step of rank @p rank: SIGKILL or SIGSTOP to this process where planned, else nothing.
  /// @param rank this worker
  /// @param step the step about to start, from 0
  void strike_at_step(int rank, int step) const;
  /// The model rank @p rank builds: @p config, with one more layer where planned.
  /// @param rank   this worker
  /// @param config the model every worker should build
  gpt::GPTConfig model_for(int rank, gpt::GPTConfig config) const;
};

// The plan as JSON (the envelope's "faults"), field by field: nlohmann's to_json and from_json (hidden from
// Doxygen, which cannot read the macro).
/// @cond
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FaultPlan, kill_rank, kill_step, stop_rank, stop_step, bigger_model_rank,
                                   claimed_workers)
/// @endcond

}  // namespace speedlabs::workers
