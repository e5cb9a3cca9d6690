/// @file labs/05_gpt2/training.h
/// @brief Lab 05's training loop: one precision mode, step after step, logged, timed, interruptible.
#pragma once
#include <string>
#include <vector>

#include "common/gpt.h"
#include "common/progress.h"
#include "experiment.h"

namespace lab05 {

/// Every step's loss and time as CSV. The whole file is replaced atomically after each step, so it always
/// holds this run's finished steps and nothing else: two runs given the same path never splice their rows,
/// an interrupted run leaves whole lines, and a failed write (a full disk) stops the run with
/// speedlabs::RuntimeFailure (exit 3) while the file keeps the steps written before.
class CsvLog {
 public:
  /// @param path  the CSV file ("" = no CSV: add() does nothing)
  explicit CsvLog(std::string path);
  /// Appends one line (without its newline) and replaces the file.
  void add(const std::string& line);

 private:
  std::string path_;
  std::string text_;
};

/// What every mode's loop shares.
struct TrainingRun {
  const Config& config;                          ///< steps, batch, seed, learning rate, logging
  const c10::Device& device;                     ///< where to train
  const speedlabs::gpt::GPTConfig model_config;  ///< the model's shape
  const std::vector<int32_t>& tokens;            ///< the dataset
  CsvLog& csv;                                   ///< every step's line
  speedlabs::ProgressBar& bar;                   ///< the progress bar (stderr, a terminal only)
};

/// True when @p step is printed (every config.log_every steps and the last): the loss curves compare those.
bool logged(int step, const Config& config);

/// Trains one mode from the seed's initial weights on the dataset's first batches: the same weights and
/// batches in every mode. Throws speedlabs::RuntimeFailure on a non-finite loss (fp32, tf32, bf16), on
/// eight non-finite fp16 losses in a row, and when Ctrl-C or SIGTERM asks to stop (between two steps).
ModeResult train_one_mode(const TrainingRun& run, speedlabs::Precision mode);

}  // namespace lab05
