/// @file labs/13_speedrun/src/peer.h
/// @brief The Python peer: the baseline's recipe in PyTorch (reference/speedrun_peer.py), raced as a trainer
/// of its own, a step at a time, beside the C++ baseline in the same run.
#pragma once
#include <memory>
#include <string>

#include "common/files.h"
#include "common/process.h"
#include "exercise.h"

namespace lab13 {

/// A Trainer that asks a Python process to do each call: init, step and weights() are the lab's requests and
/// the peer's answers, timed here like any trainer's calls (a request and its answer cost tens of microseconds
/// against a step's tens of milliseconds). The peer starts from the baseline's own initial weights (the same
/// seed, the same GPT), takes the same batches in the same order and uses as many threads as this process.
class PythonPeer : public Trainer {
 public:
  /// Starts @p python on reference/speedrun_peer.py (not timed: starting Python and importing torch);
  /// RuntimeFailure when it cannot start.
  /// @param python   Python with torch
  /// @param compiled run the model under torch.compile
  /// @param config   what the baseline is handed
  PythonPeer(const std::string& python, bool compiled, const TrainerConfig& config);
  /// Asks the peer to quit, ends it if it does not, and removes its weights file.
  ~PythonPeer() override;
  void init(const TrainerConfig& config) override;
  void step() override;
  speedlabs::gpt::NamedTensors weights() override;

 private:
  std::unique_ptr<speedlabs::UnnamedFile> state_;  // the recipe, the stream, the initial weights
  std::string weights_path_;                       // where the peer writes its weights, removed at the end
  std::unique_ptr<speedlabs::LineChild> child_;
};

}  // namespace lab13
