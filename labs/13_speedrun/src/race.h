/// @file labs/13_speedrun/src/race.h
/// @brief The race: the baseline, the student's trainer and the Python peers advance round-robin, step by step,
/// the order reversing every round; each one's time is the sum of its own timed calls; the evaluator's validation
/// every few steps' worth of characters is not timed; each stops at the target, at the step cap, or when a call of it
/// throws.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "common/contention.h"
#include "exercise.h"
#include "task.h"

namespace lab13 {

/// One validation of a trainer: after how many steps, at how many of its timed seconds, the loss.
struct Point {
  int step = 0;         ///< steps done
  double seconds = 0;   ///< the trainer's timed seconds so far (init, steps, weights())
  double val_loss = 0;  ///< the evaluator's loss (NaN for non-finite weights)
};

/// One trainer in the race and what it did.
struct Contender {
  std::string name;                  ///< "baseline", "trainer", "python_eager", "python_compiled"
  TrainerConfig config;              ///< what it was given
  std::unique_ptr<Trainer> trainer;  ///< the trainer itself
  double init_ms = 0;                ///< init()'s time
  double weights_ms = 0;             ///< every weights() call's time, summed
  std::vector<double> step_ms;       ///< each step's time, in order
  std::vector<int64_t> step_batch;   ///< each step's B (batch() after it), in order
  std::vector<Point> curve;          ///< each validation
  bool done = false;                 ///< stopped: target reached, step cap, or failure (or never started)
  bool reached = false;              ///< its loss got to the target
  std::string failure;               ///< why it scores 0 ("" when it reached the target)
  /// Every timed millisecond: init, steps, weights().
  double total_ms() const;
  /// B of its latest step: the trainer's own (Trainer::batch()) or the run's.
  int64_t batch() const;
  /// Sequences trained on over every step (the sum of step_batch).
  int64_t sequences() const;
  /// Steps taken.
  int steps() const { return static_cast<int>(step_ms.size()); }
};

/// What the race needs besides its contenders.
struct RaceSettings {
  double target = 0;             ///< the validation loss to reach (at or under)
  int step_cap = 0;              ///< each trainer's most steps
  int eval_every = 0;            ///< validate after every this many baseline steps' worth of sequences (and at the cap)
  const Split* split = nullptr;  ///< the data
  bool progress_bar = true;      ///< progress on stderr: a redrawn line on a terminal, a line per validation elsewhere
};

/// Runs the race to its end; fills each contender's times and curve. Returns the machine's reading over it.
/// Ctrl-C or SIGTERM stops it between two steps (speedlabs::RuntimeFailure).
speedlabs::Contention race(std::vector<Contender*> contenders, const RaceSettings& settings);

}  // namespace lab13
