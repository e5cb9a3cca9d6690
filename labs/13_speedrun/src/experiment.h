/// @file labs/13_speedrun/src/experiment.h
/// @brief Lab 13: the CPU speedrun. Your trainer races the lab's baseline (nanoGPT's CPU recipe) to a target
/// validation loss on tiny shakespeare's characters; the score is the baseline's time over yours, measured side
/// by side in one run, with the same recipe in Python beside them.
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "common/cli.h"
#include "common/observations.h"
#include "race.h"

namespace lab13 {

/// The run's knobs; the defaults are the full speedrun: nanoGPT's "baby GPT" for a laptop CPU to its 1.88.
struct Config {
  int64_t n_layer = 4;        ///< the model's layers (the limits: task.h)
  int64_t n_embd = 128;       ///< its width
  int64_t n_head = 4;         ///< its heads
  int64_t block = 64;         ///< its context (rows of the position embedding)
  Recipe recipe;              ///< the baseline's batch, T, AdamW and schedule (exercise.h)
  uint64_t seed = 42;         ///< the initial weights' seed
  double target = 1.88;       ///< the validation loss to reach
  int step_cap = 3000;        ///< each trainer's most steps
  int eval_every = 50;        ///< validate every this many baseline steps' worth of characters (not timed)
  std::string python;         ///< Python with torch for the peers ("" = no peers)
  bool compiled_peer = true;  ///< race a torch.compile peer as well (not under --quick)
  bool ablation = true;       ///< race the trainer with each of its techniques off in turn (not under --quick)
  std::string data_dir;       ///< --data-dir
  std::string plots_dir;      ///< lab13_speedrun.svg here ("" = none)
  std::string record_to;      ///< append the run to this records.jsonl ("" = no record)
  std::string commit;         ///< the commit the record names (the driver passes it; "" = unknown)
  bool progress_bar = true;   ///< a progress line on stderr while the trainers race
};

/// The lowest target the lab accepts: no model of the limits gets the validation split near it in a run.
inline constexpr double kLowestTarget = 1.4;

/// The lab's knobs, each once. --quick: the same model and recipe to a higher target, about a minute. (A model of
/// 2 layers x 64 raced to 2.5 in 14 s, but there a step is mostly fixed costs and the reference, whose steps are
/// larger, lost: 0.79x.)
inline speedlabs::Knobs<Config> knobs() {
  speedlabs::Knobs<Config> knobs;
  knobs.flag("--layers", "the model's layers (1 to 6)", &Config::n_layer);
  knobs.flag("--width", "the model's width (32 to 384)", &Config::n_embd);
  knobs.flag("--heads", "the model's attention heads (heads of 8 to 64 wide)", &Config::n_head);
  knobs.flag("--context", "the model's context (64 to 256)", &Config::block);
  knobs
      .flag(
          "--batch", "the baseline's B", [](auto& c) -> auto& { return c.recipe.batch; })
      .check(speedlabs::at_least(int64_t{1}));
  knobs
      .flag(
          "--seq", "T of every step, at most the context", [](auto& c) -> auto& { return c.recipe.seq; })
      .check(speedlabs::at_least(int64_t{1}));
  knobs
      .flag(
          "--lr", "the baseline's peak AdamW learning rate", [](auto& c) -> auto& { return c.recipe.lr; })
      .check(speedlabs::finite_above());
  knobs
      .flag(
          "--decay-steps", "the step where the baseline's cosine reaches its floor",
          [](auto& c) -> auto& { return c.recipe.decay_steps; })
      .check(speedlabs::at_least(1));
  knobs.flag("--target", "the validation loss to reach (nats)", &Config::target)
      .quick(2.4)
      .check(speedlabs::finite_above());
  knobs.flag("--step-cap", "each trainer's most steps", &Config::step_cap).quick(1200).check(speedlabs::at_least(1));
  knobs
      .flag("--eval-every", "validate every this many baseline steps' worth of characters (not timed)",
            &Config::eval_every)
      .check(speedlabs::at_least(1));
  knobs.flag("--python", "Python with torch for the Python peers (\"\": none)", &Config::python);
  // A part of the full race that --quick leaves out, given as 1 or 0 (so the full race can leave it out too).
  const auto full_race_part = [&knobs](const char* name, const char* help, bool Config::*part) {
    knobs
        .flag<int>(
            name, help, [part](const Config& c) { return c.*part ? 1 : 0; },
            [part](Config& c, int on) { c.*part = on != 0; })
        .quick(0)
        .check(CLI::Range(0, 1));
  };
  full_race_part("--compiled-peer", "1: race a torch.compile peer too; 0: not", &Config::compiled_peer);
  full_race_part("--ablation", "1: race the trainer with each technique off in turn; 0: not", &Config::ablation);
  knobs.flag("--plots", "write lab13_speedrun.svg (validation loss against seconds) here", &Config::plots_dir);
  knobs.flag("--record-to", "append this run to a records.jsonl file (./lab speedrun --record)", &Config::record_to);
  knobs.flag("--commit", "the commit a record names", &Config::commit);
  knobs.data_dir_flag(&Config::data_dir);
  return knobs;
}

/// What --quick runs before any flag (the tests start from it).
inline Config quick_config() { return knobs().quick(); }

/// What the race of the lab's baseline against the student's trainer and the Python peers gave.
struct Outcome {
  Contender baseline;                ///< the lab's baseline
  Contender trainer;                 ///< the student's trainer
  std::vector<Contender> peers;      ///< the Python peers ("python_eager", "python_compiled"), raced or not (why)
  speedlabs::Contention contention;  ///< the machine over the race
  Split split;                       ///< the data (the training stream every side was handed)
  double score = 0;                  ///< baseline seconds / trainer seconds; 0 when the trainer failed
  std::string score_reason;          ///< why the score is 0 ("" otherwise)
  nlohmann::json ablation;           ///< each technique's race without it (null when no ablation ran)
};

/// The model both trainers train, from @p config (checked against the limits: UsageError).
speedlabs::gpt::GPTConfig model_of(const Config& config);

/// Checks every size, the target and the output paths before any work (UsageError, exit 2).
void check_config(const Config& config);

/// Loads the characters, splits them, races the baseline against make_trainer() and the Python peers on the CPU.
/// @param config the race's sizes, target and caps (and which peers)
/// @param make   the student's trainer (lab13::make_trainer in the program)
Outcome race_once(const Config& config, const std::function<std::unique_ptr<Trainer>()>& make);

/// The whole lab: checks, the race, the table, the observations, the plot, the record.
void run(const Config& config, const c10::Device& device, speedlabs::Report& report);

}  // namespace lab13
