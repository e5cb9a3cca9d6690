// Lab 08, part 3: the largest batch that fits a memory budget, predicted and run; and the checks of the
// budget and the batch that run before anything else.
#include <torch/types.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>

#include "common/errors.h"
#include "common/format.h"
#include "common/memory.h"
#include "parts.h"

namespace lab08 {

using json = nlohmann::json;
using speedlabs::gpt::GPT;
using speedlabs::gpt::GPTConfig;

int64_t largest_batch_formula(const ModelShape& shape, int64_t seq, bool checkpoint, int64_t budget_bytes) {
  // The peak grows with the batch: double until it no longer fits, then halve the gap. A batch above 2^31
  // would fit no real machine and would overflow the formula's bytes for GPT-2's vocabulary.
  constexpr int64_t kLargestBatch = int64_t{1} << 31;
  const auto fits = [&](int64_t batch) {
    return step_peak_bytes_formula(shape, batch, seq, checkpoint) <= budget_bytes;
  };
  if (!fits(1)) return 0;
  int64_t low = 1, high = 2;  // fits(low), and high is not known to fit
  while (high <= kLargestBatch && fits(high)) {
    low = high;
    high *= 2;
  }
  if (high > kLargestBatch) return low;
  while (high - low > 1) {
    const int64_t middle = low + (high - low) / 2;
    (fits(middle) ? low : high) = middle;
  }
  return low;
}

int64_t measure_steady_step_peak(const std::string& model, const StepSetup& setup, const c10::Device& device) {
  const GPTConfig config = checked_config(model, setup.seq);
  speedlabs::TensorMemoryMeter meter(device);
  const auto [x, y] = random_batch(config, setup, device);
  const int64_t base = meter.live();
  GPT gpt = build_model(config, device);
  auto optimizer = speedlabs::gpt::make_adamw(gpt, kLr);
  memory_train_step(gpt, optimizer, x, y, setup);  // the first step makes AdamW's state
  meter.reset_peak();
  memory_train_step(gpt, optimizer, x, y, setup);
  return meter.peak() - base;
}

// The budget, checked before anything runs: not even B = 1 fitting is the user's input to fix.
int64_t checked_budget_bytes(const Config& config, const ModelShape& shape, const c10::Device& device) {
  // The budget is a share of this machine: more than it has would ask for a batch no run here can hold (and
  // a budget of exabytes would overflow the byte count).
  const auto total = speedlabs::total_memory_bytes(device);
  if (total && config.budget_mb * speedlabs::kBytesPerMiB > static_cast<double>(*total)) {
    throw speedlabs::UsageError("--budget-mb " + std::to_string(static_cast<int64_t>(config.budget_mb)) +
                                " is more than " + (device.is_cpu() ? "this machine's" : device.str() + "'s") +
                                " memory (" + mib_text(*total) + "): give a budget it can hold");
  }
  const auto budget = static_cast<int64_t>(config.budget_mb * speedlabs::kBytesPerMiB);
  const int64_t smallest = step_peak_bytes_formula(shape, 1, config.seq, /*checkpoint=*/true);
  if (smallest > budget) {
    const int64_t state = weights_bytes_formula(shape) + grads_bytes_formula(shape) + adamw_state_bytes_formula(shape);
    std::ostringstream message;
    message << "--budget-mb " << config.budget_mb << " is too small: even batch 1 of " << config.seq << " tokens needs "
            << mib_text(smallest)
            << " with checkpointing (weights, gradients and AdamW state alone: " << mib_text(state)
            << "); give at least " << std::ceil(mib(smallest));
    throw speedlabs::UsageError(message.str());
  }
  return budget;
}

// The step's batch, checked before anything runs: a batch whose float32 step is predicted not to fit this
// machine's memory (or whose byte count would overflow) is the user's input to fix, not a failed allocation.
void check_batch(const Config& config, const ModelShape& shape, const c10::Device& device) {
  const auto total = speedlabs::total_memory_bytes(device);
  const int64_t limit = total.value_or(std::numeric_limits<int64_t>::max());
  const int64_t largest = largest_batch_formula(shape, config.seq, /*checkpoint=*/false, limit);
  if (config.batch <= largest) return;
  std::ostringstream message;
  message << "--batch " << config.batch << " is too large: a float32 step of the " << config.model
          << " model at T=" << config.seq << " fits ";
  if (total) {
    message << (device.is_cpu() ? "this machine's" : device.str() + "'s") << " memory (" << mib_text(*total)
            << ") up to B=" << largest;
  } else {
    message << "no machine above B=" << largest;
  }
  throw speedlabs::UsageError(message.str());
}

void run_budget(const Config& config, const ModelShape& shape, int64_t budget, const c10::Device& device,
                speedlabs::Report& report) {
  std::cout << "\n== The largest batch that fits " << config.budget_mb << " MiB (T=" << config.seq << ") ==\n";
  json measured = json::object();
  bool fits = true;
  for (const bool checkpoint : {false, true}) {
    const std::string name = checkpoint ? "checkpointed" : "plain";
    const int64_t batch = largest_batch_formula(shape, config.seq, checkpoint, budget);
    if (batch == 0) {
      std::cout << "  " << name << ": not even B=1 fits\n";
      measured[name] = {{"batch", 0}};
      continue;
    }
    const int64_t predicted = step_peak_bytes_formula(shape, batch, config.seq, checkpoint);
    const int64_t peak = measure_steady_step_peak(config.model, {batch, config.seq, std::nullopt, checkpoint}, device);
    fits = fits && peak <= budget;
    std::cout << "  " << name << ": B=" << batch << " (B=" << batch + 1 << " would need "
              << mib_text(step_peak_bytes_formula(shape, batch + 1, config.seq, checkpoint)) << "); predicted peak "
              << mib_text(predicted) << ", measured " << mib_text(peak) << "\n";
    measured[name] = {{"batch", batch}, {"predicted_peak_bytes", predicted}, {"measured_peak_bytes", peak}};
  }
  measured["budget_bytes"] = budget;
  report.check("largest_batch_fits_budget",
               "the largest batch the formula allows, run, peaks within the budget (with and without checkpointing)",
               measured, "measured peak <= --budget-mb", fits);
}

}  // namespace lab08
