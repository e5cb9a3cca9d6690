/// @file labs/06_compile_ahead/src/python_peers.h
/// @brief The Python peers: reference/gpt_peers.py run on the rungs' own weights and batches, eagerly
/// and with torch.compile, as a child process started from an argv vector (common/process.h).
#pragma once
#include <string>
#include <vector>

#include "experiment.h"
#include "rung_runner.h"

namespace lab06 {

/// Runs the peers of @p config at @p shape: writes the weights and batches to a temporary file, starts
/// `config.python gpt_peers.py` on it and reads the peers' results back. The state file has no name while
/// the peers run and the result files are removed on every way out, so even a SIGKILL leaves no file (and the
/// child dies with this process); Ctrl-C or SIGTERM ends the child and throws speedlabs::RuntimeFailure; a
/// child still running after config.peer_timeout_s is stopped and @p failure says so.
/// @param config        python, peer and compile modes, warm-up and steps, learning rate, time limit
/// @param device        where the peers run (cpu or cuda)
/// @param shape         B and T
/// @param model_config  the unpadded model
/// @param weights       the initial weights every rung starts from
/// @param batches       the batches every rung trains on
/// @param failure       set to why, when the peers could not run or wrote no valid result
/// @return the peers' results (empty, with @p failure set, when they did not run)
std::vector<RungResult> run_python_peers(const Config& config, const c10::Device& device, const Shape& shape,
                                         const speedlabs::gpt::GPTConfig& model_config,
                                         const speedlabs::gpt::NamedTensors& weights, const Batches& batches,
                                         std::string& failure);

}  // namespace lab06
