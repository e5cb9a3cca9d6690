/// @file labs/13_speedrun/src/outputs.h
/// @brief What a speedrun shows and keeps: the table, the observations, the chart, the record.
#pragma once
#include <string>

#include "experiment.h"

namespace lab13 {

/// The race's table: each trainer's time, steps, tokens/s and final loss, then the score.
void print_outcome(const Outcome& outcome);

/// baseline_reaches_target, trainer_reaches_target, speedup_over_baseline, validation_never_seen, mfu_per_step.
void record_observations(const Outcome& outcome, const Config& config, speedlabs::Report& report);

/// ablation: the trainer raced against itself with each of its techniques off in turn (not under --quick, nor
/// for a trainer that lists none or did not reach the target: then said why); kept in @p outcome for the record.
void record_ablation(Outcome& outcome, const Config& config, speedlabs::Report& report);

/// Throws speedlabs::UsageError (exit 2) when @p path cannot take a record: a folder, a device, a link, a
/// folder that does not exist, or a file that cannot be written.
void require_record_writable(const std::string& path);

/// The chart (--plots) and the record (--record-to): the record is the file's lines and the new one, written to
/// a temporary file beside it and renamed over it, so a full disk leaves the old file whole (RuntimeFailure, 3).
void write_outputs(const Outcome& outcome, const Config& config);

/// Rounds pooled into windows for the score's samples: at most this many rounds a window...
constexpr size_t kScoreWindow = 5;
/// ... and at least this many windows where there are rounds enough (one round a window otherwise).
constexpr size_t kMinScoreWindows = 5;

/// The score estimated from each window of consecutive rounds where both trainers stepped: both totals as if every
/// sequence had taken that window's time a sequence (the steps of a window saw the same stretch of the machine).
/// The samples the verdict rests on.
speedlabs::Summary per_round_scores(const Outcome& outcome);

/// The record's line: date, CPU model, cores, instruction sets, commit, config, score, times, techniques, ablation.
nlohmann::json record_of(const Outcome& outcome, const Config& config);

}  // namespace lab13
