#include "training.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "common/errors.h"
#include "common/format.h"
#include "common/memory.h"
#include "common/process.h"
#include "common/timer.h"
#include "datasets/data_loader.h"
#include "exercise.h"

namespace lab05 {

using speedlabs::fixed;
using speedlabs::Precision;
namespace gpt = speedlabs::gpt;

namespace {

// An fp16 step whose loss overflows is skipped while the scaler lowers its scale; the loss itself comes
// from the forward pass, which the scale does not touch, so this many overflowed losses in a row mean a
// run that cannot recover: it stops as one that could not be made (exit 3), not as a verdict.
constexpr int kMaxNonfiniteInARow = 8;

}  // namespace

MemoryEstimate estimate_memory(const Config& config) {
  const gpt::GPTConfig m = gpt::GPTConfig::by_name(config.model);
  const double C = static_cast<double>(m.n_embd), B = static_cast<double>(config.batch),
               T = static_cast<double>(config.seq), V = static_cast<double>(m.vocab_size);
  // Token and position embeddings (the head is tied to the first), 12 C^2 + 13 C per block, the last layer norm.
  const double parameters =
      (V + static_cast<double>(m.block_size)) * C + static_cast<double>(m.n_layer) * (12 * C * C + 13 * C) + 2 * C;
  const bool all_16_bit = std::all_of(config.modes.begin(), config.modes.end(),
                                      [](Precision p) { return p == Precision::bf16 || p == Precision::fp16; });
  MemoryEstimate estimate;
  estimate.training_state = (12.0 * static_cast<double>(config.modes.size()) + 4) * parameters;
  estimate.activations =
      static_cast<double>(m.n_layer) * B * T * (16 * C + 2 * static_cast<double>(m.n_head) * T) * (all_16_bit ? 2 : 4);
  estimate.logits = 2 * B * T * V * 4;
  return estimate;
}

void require_memory_fits(const Config& config, const c10::Device& device) {
  const auto total = speedlabs::total_memory_bytes(device);
  const MemoryEstimate need = estimate_memory(config);
  if (!total || need.total() <= static_cast<double>(*total)) return;
  using speedlabs::format_bytes;
  throw speedlabs::UsageError(
      "--config " + config.model + " --batch " + std::to_string(config.batch) + " --seq " + std::to_string(config.seq) +
      " with " + std::to_string(config.modes.size()) + " mode(s) needs at least " + format_bytes(need.total()) +
      " (weights, gradients and AdamW state " + format_bytes(need.training_state) + ", one step's activations " +
      format_bytes(need.activations) + ", logits " + format_bytes(need.logits) + "), more than all the " +
      format_bytes(static_cast<double>(*total)) + " of " +
      (device.is_cpu() ? "host memory" : device.str() + " memory") + " here: try a smaller --batch or --seq");
}

bool logged(int step, const Config& config) { return step % config.log_every == 0 || step == config.steps - 1; }

namespace {

// The bytes tensors hold on @p device now: resetting the allocator's peak makes it what is allocated now.
// nullopt where the allocator keeps no statistics (the CPU).
std::optional<int64_t> allocated_now(const c10::Device& device) {
  speedlabs::reset_peak_memory(device);
  return speedlabs::peak_memory_bytes(device);
}

// One mode's training: its own model, optimizer, scaler and loader, and what it measured so far.
struct ModeState {
  ModeState(const TrainingRun& run, Precision mode)
      : model(run.model_config, causal_attention),
        loader(run.tokens, run.config.batch, run.config.seq),
        optimizer((model->to(run.device), gpt::make_adamw(model, run.config.lr))),
        name(speedlabs::to_string(mode)) {
    result.mode = mode;
  }
  gpt::GPT model;
  datasets::DataLoaderLite loader;
  torch::optim::AdamW optimizer;
  lab03::GradScaler scaler;  // your lab 03 scaler; train_step needs it in fp16 only
  std::string name;
  ModeResult result;
  int nonfinite_in_a_row = 0;
  // Device memory, where the allocator counts it: the bytes this mode's own tensors hold between its steps
  // (model, gradients, optimizer state), and its peak (those plus its step's transient tensors). Every mode
  // lives at once, so a step's peak less what the other modes hold is this mode's own peak.
  int64_t own_bytes = 0;
  std::optional<int64_t> peak_bytes;
};

// Step @p step of one mode: timed, written to the CSV, checked for a non-finite loss, logged.
void train_step_of(const TrainingRun& run, ModeState& m, int step, double tokens_per_step) {
  const Config& config = run.config;
  // Ctrl-C or SIGTERM: stop between two steps (the progress bar erases itself on the way out).
  speedlabs::stop_if_asked("at step " + std::to_string(step) + " of mode " + m.name +
                           (config.csv_path.empty() ? "" : "; the steps done so far are in " + config.csv_path));
  const auto before = allocated_now(run.device);
  torch::Tensor loss;
  const double ms = speedlabs::time_once_ms(
      [&] {
        const auto batch = m.loader.next_batch();
        loss =
            train_step(m.model, m.optimizer, batch.x.to(run.device), batch.y.to(run.device), m.result.mode, &m.scaler);
      },
      run.device);
  if (before) {
    const int64_t peak = speedlabs::peak_memory_bytes(run.device).value_or(*before);
    const int64_t others = *before - m.own_bytes;
    m.peak_bytes = std::max(m.peak_bytes.value_or(0), peak - others);
    m.own_bytes += allocated_now(run.device).value_or(*before) - *before;
  }
  const double value = loss.item<double>();
  const StepRecord record{step, value, ms, tokens_per_step / (ms / 1000.0)};
  m.result.steps.push_back(record);
  std::ostringstream line;
  line << m.name << ',' << step << ',' << std::setprecision(9) << value << ',' << fixed(ms, 3) << ','
       << fixed(record.tokens_per_s, 1);
  run.csv.add(line.str());  // after every step: a killed or interrupted run keeps every finished step
  if (!std::isfinite(value)) {
    if (m.result.mode != Precision::fp16) {
      throw speedlabs::RuntimeFailure("the loss is " + std::string(std::isnan(value) ? "NaN" : "inf") + " at step " +
                                      std::to_string(step) + " in " + m.name +
                                      ": training diverged; try a smaller --lr");
    }
    ++m.result.nonfinite_fp16_steps;  // float16 overflow: the scaler skips this step and lowers the scale
    if (++m.nonfinite_in_a_row == kMaxNonfiniteInARow) {
      throw speedlabs::RuntimeFailure("the fp16 loss is NaN or inf at " + std::to_string(kMaxNonfiniteInARow) +
                                      " steps in a row (to step " + std::to_string(step) +
                                      "): the forward pass overflows float16, which loss scaling cannot fix; "
                                      "try a smaller --lr, or bf16");
    }
  } else {
    m.nonfinite_in_a_row = 0;
  }
  if (logged(step, config)) {
    run.bar.clear();
    std::cout << "  " << std::left << std::setw(5) << m.name << std::right << "step " << std::setw(4) << step
              << " | loss " << fixed(value, 6) << " | " << std::setw(9) << fixed(ms, 2) << " ms/step | " << std::setw(9)
              << fixed(record.tokens_per_s, 0) << " tokens/s" << std::endl;
  }
}

}  // namespace

std::vector<ModeResult> train_modes(const TrainingRun& run, const std::vector<Precision>& modes) {
  const Config& config = run.config;
  std::vector<std::unique_ptr<ModeState>> states;
  std::string label;
  for (Precision mode : modes) {
    const auto before = allocated_now(run.device);
    // The same seed before each model: every mode starts from the same weights (and each loader reads the
    // same batches from the start).
    torch::manual_seed(config.seed);
    states.push_back(std::make_unique<ModeState>(run, mode));
    if (before) {
      states.back()->own_bytes = allocated_now(run.device).value_or(*before) - *before;
      states.back()->peak_bytes = states.back()->own_bytes;
    }
    label += (label.empty() ? "" : " ") + states.back()->name;
  }

  // Round-robin, step by step: mode A step s, mode B step s, ..., the order reversed every other step so that
  // no mode always runs right after another. Step s of every mode sees the same moment of the machine.
  const double tokens_per_step = static_cast<double>(config.batch * config.seq);
  for (int step = 0; step < config.steps; ++step) {
    for (size_t i = 0; i < states.size(); ++i) {
      ModeState& m = *states[step % 2 == 0 ? i : states.size() - 1 - i];
      train_step_of(run, m, step, tokens_per_step);
    }
    run.bar.show(label, step + 1);
  }
  run.bar.clear();

  std::vector<ModeResult> results;
  for (auto& state : states) {
    ModeResult& result = state->result;
    std::vector<double> timed;
    for (const auto& s : result.steps) {
      if (s.step >= warmup_steps(config.steps)) timed.push_back(s.ms);
    }
    if (timed.empty()) timed.push_back(result.steps.back().ms);  // a one-step run has only its warm-up step
    result.median_ms = speedlabs::summarize(timed).median_ms;
    result.tokens_per_s = tokens_per_step / (result.median_ms / 1000.0);
    result.peak_bytes = state->peak_bytes;
    result.final_loss_scale = result.mode == Precision::fp16 ? state->scaler.get_scale() : 1.0;
    std::set<std::string> dtypes;
    for (const auto& p : state->model->parameters()) dtypes.insert(c10::toString(p.scalar_type()));
    result.weight_dtypes.assign(dtypes.begin(), dtypes.end());
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace lab05
