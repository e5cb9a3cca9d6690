/// @file labs/05_gpt2/training.h
/// @brief Lab 05's training loop: every precision mode trained side by side, step by step (round-robin),
/// logged, timed, interruptible.
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

/// Trains every mode of @p modes from the seed's initial weights on the dataset's first batches (the same
/// weights and batches in every mode), round-robin: step s of every mode, then step s + 1, the order of the
/// modes reversed every other step. Each mode keeps its own model, optimizer, scaler and loader, so all of
/// them are in memory at once; the step times of different modes taken at the same step saw the same
/// moment of the machine, and their ratios are per-step pairs. Throws speedlabs::RuntimeFailure on a
/// non-finite loss (fp32, tf32, bf16), on eight non-finite fp16 losses in a row, and when Ctrl-C or SIGTERM
/// asks to stop (between two steps).
/// @return each mode's result, in the order of @p modes; contention is left for the caller to fill
std::vector<ModeResult> train_modes(const TrainingRun& run, const std::vector<speedlabs::Precision>& modes);

}  // namespace lab05
