/// @file labs/14_model_parallel/src/pipeline.h
/// @brief Pipeline parallelism of the GPT: the blocks split over N stages (stage 0 also embeds, the last stage
/// also runs ln_f, the tied head and the loss), M micro-batches per step flowing through them, run in the order
/// of GPipe (every forward, then every backward) or of 1F1B (the exercise's one_f_one_b_schedule).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "exercise.h"
#include "worker.h"

namespace speedlabs::workers {
struct Engine;
}

namespace lab14 {

/// GPipe's order for any stage: the M forwards, then the M backwards, each in micro-batch order.
/// @param micro_batches M (at least 1)
std::vector<PipeOp> gpipe_schedule(int micro_batches);

/// The order of @p schedule ("gpipe" or "1f1b") for stage @p stage of @p stages.
/// @param schedule      "gpipe" or "1f1b"
/// @param stage         this stage
/// @param stages        N
/// @param micro_batches M
std::vector<PipeOp> schedule_for(const std::string& schedule, int stage, int stages, int micro_batches);

/// The share of each stage's time that the pipeline leaves idle when every stage's forward and backward take
/// the same time and messages take none: (N-1) / (M+N-1), for both schedules.
/// @param stages        N
/// @param micro_batches M
double bubble_formula(int stages, int micro_batches);

/// A PP job's work on one worker: for every schedule and M of the job, job.steps AdamW steps from the seed's
/// weights. Rank 0's result holds, per run, the losses, each stage's busy time and the pipeline's span per step,
/// the most micro-batches a stage held at once and the bytes its activations took, and the last step's timeline
/// (every operation's start and end on every stage).
/// @param job    the job (job.micro_batches, job.schedules)
/// @param engine the workers
nlohmann::json train_pipeline(const Job& job, speedlabs::workers::Engine& engine);

}  // namespace lab14
