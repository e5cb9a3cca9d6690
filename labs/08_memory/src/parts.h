/// @file labs/08_memory/src/parts.h
/// @brief Lab 08's insides: the measured training step the lesson's three parts share (the model, its
/// tokens, one step) and each part's entry point, which experiment.cpp's run() calls in the lesson's order.
/// Not part of the lab's interface (experiment.h).
#pragma once
#include <c10/core/Device.h>
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/gpt.h"
#include "common/observations.h"
#include "common/timer.h"
#include "experiment.h"

namespace lab08 {

inline constexpr uint64_t kSeed = 1337;  ///< every model and batch of the lab is drawn from this seed
inline constexpr double kLr = 3e-4;      ///< AdamW's learning rate (the bytes do not depend on it)
inline constexpr int64_t kFloat = 4;     ///< bytes of a float32

/// Bytes in MiB.
double mib(int64_t bytes);
/// "12.34 MiB".
std::string mib_text(int64_t bytes);

/// The model's config; UsageError when @p seq is outside 1..block size.
speedlabs::gpt::GPTConfig checked_config(const std::string& model, int64_t seq);

/// The model, the same weights on every call, with the written-out attention (the activations it saves are
/// the ones the formula counts).
speedlabs::gpt::GPT build_model(const speedlabs::gpt::GPTConfig& config, const c10::Device& device);

/// Random tokens and targets (B, T): the bytes a step holds do not depend on which tokens it reads.
std::pair<torch::Tensor, torch::Tensor> random_batch(const speedlabs::gpt::GPTConfig& config, const StepSetup& setup,
                                                     const c10::Device& device);

/// GPT-2's forward and loss, each block through checkpointed_block() when the step checkpoints, under
/// autocast when the step asks for it.
torch::Tensor step_loss(speedlabs::gpt::GPT& model, const torch::Tensor& x, const torch::Tensor& y,
                        const StepSetup& setup);

/// One training step: forward, backward, AdamW, zero_grad.
void memory_train_step(speedlabs::gpt::GPT& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x,
                       const torch::Tensor& y, const StepSetup& setup);

/// The plain and the checkpointed step timed in rounds side by side, so both see the same machine.
speedlabs::Interleaved time_steps(const std::string& model, const StepSetup& a, const StepSetup& b,
                                  const c10::Device& device, int warmup, int repeats);

/// One line of one run's phases in MiB: weights, after forward, backward peak, after backward, after AdamW.
/// @param title the run's name
/// @param p     its phases
void print_phases(const std::string& title, const PhaseBytes& p);

/// (name, phases) of each run the phase plot draws, in the order measured.
using PlottedRuns = std::vector<std::pair<std::string, PhaseBytes>>;

/// Part 1, "The step, phase by phase" (phases.cpp): weights, gradients, AdamW state and activations against
/// their formulas, then bf16 autocast's activations and the training-memory table.
void run_phases(const Config& config, const ModelShape& shape, const c10::Device& device, speedlabs::Report& report,
                PlottedRuns& plotted);

/// Part 2, "Activation checkpointing" (checkpointing.cpp): activations, step time and gradients of the
/// checkpointed step against the plain one.
void run_checkpointing(const Config& config, const c10::Device& device, speedlabs::Report& report,
                       PlottedRuns& plotted);

/// Part 3, "The largest batch that fits" (budget.cpp): the largest batch the formula allows, run.
void run_budget(const Config& config, const ModelShape& shape, int64_t budget, const c10::Device& device,
                speedlabs::Report& report);

/// The budget in bytes, checked before anything runs: more than the device's memory, or not even B = 1
/// fitting with checkpointing, is a UsageError.
int64_t checked_budget_bytes(const Config& config, const ModelShape& shape, const c10::Device& device);

/// UsageError, before anything runs, when the step's batch is predicted not to fit the device's memory.
void check_batch(const Config& config, const ModelShape& shape, const c10::Device& device);

}  // namespace lab08
