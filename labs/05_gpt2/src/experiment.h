/// @file labs/05_gpt2/src/experiment.h
/// @brief Lab 05: train GPT-2 on tiny shakespeare in fp32, tf32, bf16 and fp16 and compare speed and loss.
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/contention.h"
#include "common/observations.h"
#include "common/precision.h"

namespace lab05 {

/// Tiny shakespeare's length in GPT-2 tokens (tiktoken's count; datasets/README).
inline constexpr int64_t kShakespeareTokens = 338025;

/// The experiment's knobs; the defaults are the chapter's run.
struct Config {
  std::string model = "gpt2";  ///< speedlabs::gpt::GPTConfig preset: "gpt2" or "tiny"
  int64_t batch = 4;           ///< B
  int64_t seq = 128;           ///< T (at most the model's block size)
  int steps = 100;             ///< training steps per mode
  double lr = 1e-3;            ///< AdamW learning rate
  uint64_t seed = 42;          ///< torch seed for the initial weights (the same in every mode)
  int log_every = 10;          ///< print a line every this many steps (and at the last step)
  std::vector<speedlabs::Precision> modes{
      speedlabs::Precision::fp32};  ///< modes to train, side by side (round-robin, step by step)
  std::string data_dir;             ///< --data-dir ("" = $SPEEDLABS_DATA_DIR, then data/ in the checkout)
  std::string csv_path;             ///< every step's loss and time as CSV ("" = none)
  std::string plots_dir;            ///< loss curves and tokens/s chart as SVG ("" = none)
  bool progress_bar = true;         ///< a progress bar on stderr, only when stderr is a terminal
};

/// The lab's knobs, each once: its flags with their defaults (Config) and --quick values. --quick trains the
/// tiny model for a few steps in every mode, on short sequences: the logits (B*T x 50257) dominate the tiny
/// model's cost; seconds per mode on a CPU, fp16 the slowest there.
inline speedlabs::Knobs<Config> knobs() {
  speedlabs::Knobs<Config> knobs;
  std::vector<std::string> precisions = speedlabs::precision_names().names();
  precisions.push_back("all");
  knobs
      .flag<std::string>(
          "--precision", "fp32, tf32, bf16, fp16, or all (side by side, step by step)",
          [](const Config& c) {
            return c.modes == speedlabs::all_precisions() ? "all" : speedlabs::to_string(c.modes[0]);
          },
          [](Config& c, const std::string& precision) {
            c.modes =
                precision == "all" ? speedlabs::all_precisions() : std::vector{speedlabs::parse_precision(precision)};
          })
      .quick("all")
      .check(CLI::IsMember(precisions));
  knobs.model_flag(&Config::model).quick("tiny");
  knobs.flag("--steps", "training steps per mode", &Config::steps).quick(15).check(speedlabs::at_least(1));
  knobs.flag("--batch", "B, sequences per batch", &Config::batch).check(speedlabs::at_least(int64_t{1}));
  knobs.flag("--seq", "T, tokens per sequence (at most the model's block size)", &Config::seq)
      .quick(32)
      .check(speedlabs::at_least(int64_t{1}));
  knobs.flag("--lr", "AdamW learning rate", &Config::lr).check(speedlabs::finite_above());
  knobs.flag("--csv", "write every step's loss and time to this CSV file", &Config::csv_path);
  knobs.flag("--plots", "write lab05_loss.svg and lab05_tokens_per_s.svg here (gnuplot)", &Config::plots_dir);
  knobs.data_dir_flag(&Config::data_dir);
  return knobs;
}

/// What --quick runs before any flag (the tests start from it).
inline Config quick_config() { return knobs().quick(); }

/// One training step as measured.
struct StepRecord {
  int step = 0;             ///< 0-based
  double loss = 0;          ///< the step's loss (float32 value)
  double ms = 0;            ///< wall time of the whole step (batch, forward, backward, update), synchronized
  double tokens_per_s = 0;  ///< B*T / time
};

/// Everything one precision mode produced.
struct ModeResult {
  speedlabs::Precision mode = speedlabs::Precision::fp32;  ///< the mode
  std::vector<StepRecord> steps;                           ///< every step, in order
  double median_ms = 0;                                    ///< median step time after the warm-up steps
  double tokens_per_s = 0;                                 ///< B*T / median step time
  std::optional<int64_t> peak_bytes;                       ///< peak device memory allocated (nullopt on the CPU)
  std::vector<std::string> weight_dtypes;                  ///< distinct parameter dtypes after training
  int nonfinite_fp16_steps = 0;                            ///< fp16 steps whose loss overflowed (the scaler skips them)
  double final_loss_scale = 1;                             ///< the GradScaler's scale at the end (fp16; 1 otherwise)
  speedlabs::Contention contention;  ///< how busy the machine was while the modes trained (one window)
};

/// Steps excluded from the speed statistics: the first 10%, at least one (allocation, kernel selection).
/// @param steps the number of steps run
int warmup_steps(int steps);

/// The step times (ms) after the warm-up steps, summarised: the samples every rate of a mode comes from.
/// @param r      the mode's result
/// @param config the run (its step count sets the warm-up)
speedlabs::Summary timed_steps(const ModeResult& r, const Config& config);

/// Trains every mode of @p config on @p device from the same initial weights and batches, side by side
/// (round-robin, step by step: every mode's model lives at once), prints the
/// logged steps and the comparison table, writes the CSV and plots, and records the observations
/// tokens_loaded, batches_per_epoch, loss_at_step_0, loss_decreases, modes_vs_fp32,
/// master_weights_dtype, tokens_per_s_<mode>, tf32_faster_than_fp32, tf32_differs_slightly_from_fp32 and mfu.
/// Throws speedlabs::UsageError before any work for a bad size or output path (--csv - among them: standard
/// output carries the run's log), for a run whose memory estimate is above all the device's memory
/// (require_memory_fits in training.h), and when another run is writing the same --csv file.
/// Throws speedlabs::RuntimeFailure when a loss is NaN or inf in fp32/tf32/bf16 (naming the step),
/// when the data is missing, or when Ctrl-C stops the run (the CSV keeps the steps done).
/// @param config the run
/// @param device where to train
/// @param report receives the observations
/// @return the results of each mode that could run, in the order of config.modes
std::vector<ModeResult> run(const Config& config, const c10::Device& device, speedlabs::Report& report);

/// Writes lab05_loss.svg (loss per step, one curve per mode) and lab05_tokens_per_s.svg (a bar per
/// mode) into @p directory with gnuplot. Returns false, after printing why to stderr, when gnuplot
/// is missing or fails; the lab goes on without plots.
/// @param results   the modes' results
/// @param directory where the SVG files go (created if needed)
/// @param title     a line naming the model, batch and device, for the plots' titles
bool write_plots(const std::vector<ModeResult>& results, const std::string& directory, const std::string& title);

}  // namespace lab05
