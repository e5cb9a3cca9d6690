/// @file labs/05_gpt2/training.h
/// @brief Lab 05's training loop: one precision mode, step after step, logged, timed, interruptible.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

#include "common/gpt.h"
#include "common/progress.h"
#include "experiment.h"

namespace lab05 {

/// Every step's loss and time as CSV. The file is made under a temporary name of this run, with its header,
/// and renamed into place at once; each step then appends its line in one checked write. So the file at
/// the path always holds one run's finished steps: a second run given the same path renames its own file
/// over it (the first one goes on writing to a file no name points to), so rows never splice; a line is
/// never half there; and a failed write (a full disk) stops the run with speedlabs::RuntimeFailure (exit 3)
/// with the file cut back to the steps before. One write per step, whatever the run's length.
class CsvLog {
 public:
  /// @param path  the CSV file ("" = no CSV: add() does nothing); throws RuntimeFailure when it cannot be made
  explicit CsvLog(std::string path);
  ~CsvLog();
  CsvLog(const CsvLog&) = delete;
  CsvLog& operator=(const CsvLog&) = delete;
  /// Appends one line (without its newline).
  void add(const std::string& line);

 private:
  std::string path_;
  int fd_ = -1;      // the file this run writes, wherever its name now is
  off_t size_ = 0;   // bytes of whole lines written so far
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
