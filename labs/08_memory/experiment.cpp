#include "experiment.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "common/autocast_guard.h"
#include "common/device.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/gpt.h"
#include "common/host_memory.h"
#include "common/memory.h"
#include "common/plot.h"
#include "common/process.h"
#include "common/timer.h"
#include "labs/05_gpt2/exercise.h"
#include "exercise.h"

#ifdef SPEEDLABS_TORCH_HAS_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace lab08 {

namespace {

using json = nlohmann::json;
using speedlabs::gpt::GPT;
using speedlabs::gpt::GPTConfig;

constexpr uint64_t kSeed = 1337;
constexpr double kLr = 3e-4;
constexpr int64_t kFloat = 4;       // bytes of a float32
constexpr int64_t kCudaRounding = 512;  // the CUDA caching allocator rounds every block up to 512 bytes
constexpr double kMiB = 1024.0 * 1024.0;

double mib(int64_t bytes) { return static_cast<double>(bytes) / kMiB; }

std::string mib_text(int64_t bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << mib(bytes) << " MiB";
  return out.str();
}

// The bytes tensors hold on one device: the counting allocator on the CPU, the caching allocator's
// statistics on a CUDA GPU. The same three numbers on both, so the lab reads the same on either.
class Meter {
 public:
  explicit Meter(const c10::Device& device) : device_(device) {
    if (device.is_cpu()) {
      speedlabs::install_host_memory_counter();
      return;
    }
#ifdef SPEEDLABS_TORCH_HAS_CUDA
    if (device.is_cuda()) return;
#endif
    throw speedlabs::UsageError("lab 08 measures memory on cpu and cuda, not on " + device.str());
  }

  void reset_peak() {
    speedlabs::synchronize(device_);
    if (device_.is_cpu()) {
      speedlabs::reset_host_memory_peak();
      return;
    }
#ifdef SPEEDLABS_TORCH_HAS_CUDA
    c10::cuda::CUDACachingAllocator::resetPeakStats(index());
#endif
  }

  int64_t live() { return read().first; }
  int64_t peak() { return read().second; }

  // Bytes the caching allocator holds from the driver (freed blocks it keeps for reuse included).
  std::optional<int64_t> reserved() {
#ifdef SPEEDLABS_TORCH_HAS_CUDA
    if (device_.is_cuda()) {
      speedlabs::synchronize(device_);
      return c10::cuda::CUDACachingAllocator::getDeviceStats(index()).reserved_bytes[kAggregate].current;
    }
#endif
    return std::nullopt;
  }

 private:
#ifdef SPEEDLABS_TORCH_HAS_CUDA
  static constexpr auto kAggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  c10::DeviceIndex index() const { return device_.has_index() ? device_.index() : 0; }
#endif

  std::pair<int64_t, int64_t> read() {
    speedlabs::synchronize(device_);
#ifdef SPEEDLABS_TORCH_HAS_CUDA
    if (device_.is_cuda()) {
      const auto& stat = c10::cuda::CUDACachingAllocator::getDeviceStats(index()).allocated_bytes[kAggregate];
      return {stat.current, stat.peak};
    }
#endif
    const speedlabs::HostMemoryStats stats = speedlabs::host_memory_stats();
    return {stats.live_bytes, stats.peak_bytes};
  }

  c10::Device device_;
};

GPTConfig checked_config(const std::string& model, int64_t seq) {
  const GPTConfig config = GPTConfig::by_name(model);
  if (seq < 1 || seq > config.block_size) {
    throw speedlabs::UsageError("sequence length " + std::to_string(seq) + " is outside 1.." +
                                std::to_string(config.block_size) + " for the " + model + " model");
  }
  return config;
}

// The same weights on every call: the seed is set before the model draws them. The attention is the
// written-out one (no fused kernel), so the activations it saves are the ones the formula counts.
GPT build_model(const GPTConfig& config, const c10::Device& device) {
  torch::manual_seed(kSeed);
  GPT model(config, lab05::causal_attention);
  model->to(device);
  return model;
}

// Random tokens: the bytes a step holds do not depend on which tokens it reads.
std::pair<torch::Tensor, torch::Tensor> random_batch(const GPTConfig& config, const StepSetup& setup,
                                                     const c10::Device& device) {
  torch::manual_seed(kSeed + 1);
  const auto options = torch::TensorOptions().dtype(torch::kLong);
  return {torch::randint(config.vocab_size, {setup.batch, setup.seq}, options).to(device),
          torch::randint(config.vocab_size, {setup.batch, setup.seq}, options).to(device)};
}

// GPT-2's forward and loss, with each block wrapped from outside: through checkpointed_block() when
// the step checkpoints, called as it is otherwise. Under autocast when the step asks for it.
torch::Tensor step_loss(GPT& model, const torch::Tensor& x, const torch::Tensor& y, const StepSetup& setup) {
  std::optional<speedlabs::AutocastGuard> autocast;
  if (setup.autocast) autocast.emplace(x.device().type(), *setup.autocast);
  const auto positions = torch::arange(x.size(1), x.options());
  auto h = model->wte->forward(x) + model->wpe->forward(positions);
  for (const auto& module : *model->h) {
    auto* block = module->as<speedlabs::gpt::Block>();
    const BlockFn run = [block](const torch::Tensor& input) { return block->forward(input); };
    h = setup.checkpoint ? checkpointed_block(run, h) : run(h);
  }
  h = model->ln_f->forward(h);
  const auto logits = torch::nn::functional::linear(h, model->lm_head_weight());
  return torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}), y.view({-1}));
}

void memory_train_step(GPT& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x, const torch::Tensor& y,
                const StepSetup& setup) {
  step_loss(model, x, y, setup).backward();
  optimizer.step();
  optimizer.zero_grad();
}

}  // namespace

Config quick_config() {
  Config config;
  config.batch = 2;
  config.seq = 32;
  config.checkpoint_seqs = {16, 32};
  config.budget_mb = 160;
  config.repeats = 3;
  return config;
}

ModelShape model_shape(const std::string& model) {
  const GPTConfig config = GPTConfig::by_name(model);
  GPT gpt(config, lab05::causal_attention);
  ModelShape shape;
  for (const auto& item : gpt->named_parameters()) {
    const std::string& name = item.key();
    const torch::Tensor& p = item.value();
    const bool matmul_input = name.find("wpe") == std::string::npos && name.find("ln_") == std::string::npos;
    if (matmul_input) shape.matmul_params += p.numel();
    shape.params += p.numel();
    shape.largest_param = std::max(shape.largest_param, p.numel());
    ++shape.tensors;
  }
  shape.n_layer = config.n_layer;
  shape.n_head = config.n_head;
  shape.n_embd = config.n_embd;
  shape.vocab = config.vocab_size;
  return shape;
}

int64_t weights_bytes_formula(const ModelShape& shape) { return kFloat * shape.params; }
int64_t grads_bytes_formula(const ModelShape& shape) { return kFloat * shape.params; }
int64_t adamw_state_bytes_formula(const ModelShape& shape) { return 2 * kFloat * shape.params; }

int64_t activations_bytes_formula(const ModelShape& shape, int64_t batch, int64_t seq, bool checkpoint) {
  const int64_t btc = batch * seq * shape.n_embd;
  // A block keeps: its input and ln_1's output (2), q, k and v copied contiguous for the batched matmuls
  // (3), the softmax's attention matrix (B, n_head, T, T), the heads' output made contiguous for c_proj
  // (1), the residual sum and ln_2's output (2), c_fc's and GELU's outputs (4 + 4): 16 (B, T, C) in all.
  const int64_t block = checkpoint ? btc : 16 * btc + batch * shape.n_head * seq * seq;
  // After the blocks: ln_f's input and output, and the log-probabilities cross_entropy keeps (B, T, V).
  const int64_t head = 2 * btc + batch * seq * shape.vocab;
  return kFloat * (shape.n_layer * block + head);
}

int64_t step_peak_bytes_formula(const ModelShape& shape, int64_t batch, int64_t seq, bool checkpoint) {
  const int64_t state = weights_bytes_formula(shape) + grads_bytes_formula(shape) + adamw_state_bytes_formula(shape);
  // Backward of the loss: the gradient of the log-probabilities and of the logits, beside the log-probabilities.
  const int64_t backward = activations_bytes_formula(shape, batch, seq, checkpoint) + 2 * kFloat * batch * seq * shape.vocab;
  // AdamW's update makes two temporaries the size of the parameter it updates (sqrt, then a division).
  const int64_t update = 2 * kFloat * shape.largest_param;
  return state + std::max(backward, update);
}

int64_t largest_batch_formula(const ModelShape& shape, int64_t seq, bool checkpoint, int64_t budget_bytes) {
  // The peak grows with the batch: double until it no longer fits, then halve the gap. A batch above 2^31
  // would fit no real machine and would overflow the formula's bytes for GPT-2's vocabulary.
  constexpr int64_t kLargestBatch = int64_t{1} << 31;
  const auto fits = [&](int64_t batch) { return step_peak_bytes_formula(shape, batch, seq, checkpoint) <= budget_bytes; };
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

std::vector<TrainingMemoryRow> training_memory_table() {
  return {{"float32 weights, gradients and AdamW", 4, 0, 4, 8},
          {"bf16 autocast (this lab): float32 everything, bf16 copies cast on the fly", 4, 0, 4, 8},
          {"mixed precision: bf16 weights and gradients, float32 master weights", 2, 4, 2, 8},
          {"everything in bf16 (no master weights)", 2, 0, 2, 4}};
}

PhaseBytes measure_phases(const std::string& model, const StepSetup& setup, const c10::Device& device) {
  const GPTConfig config = checked_config(model, setup.seq);
  Meter meter(device);
  const auto [x, y] = random_batch(config, setup, device);
  const int64_t base = meter.live();
  PhaseBytes phases;
  GPT gpt = build_model(config, device);
  phases.weights = meter.live() - base;
  auto optimizer = speedlabs::gpt::make_adamw(gpt, kLr);

  torch::Tensor loss = step_loss(gpt, x, y, setup);
  phases.after_forward = meter.live() - base;
  meter.reset_peak();
  loss.backward();
  phases.loss = loss.item<double>();
  loss = torch::Tensor();  // the graph is gone already; this frees the loss's own 4 bytes
  phases.backward_peak = meter.peak() - base;
  phases.after_backward = meter.live() - base;
  meter.reset_peak();
  optimizer.step();
  phases.after_step = meter.live() - base;
  phases.step_peak = meter.peak() - base;
  phases.reserved = meter.reserved();
  return phases;
}

int64_t measure_steady_step_peak(const std::string& model, const StepSetup& setup, const c10::Device& device) {
  const GPTConfig config = checked_config(model, setup.seq);
  Meter meter(device);
  const auto [x, y] = random_batch(config, setup, device);
  const int64_t base = meter.live();
  GPT gpt = build_model(config, device);
  auto optimizer = speedlabs::gpt::make_adamw(gpt, kLr);
  memory_train_step(gpt, optimizer, x, y, setup);  // the first step makes AdamW's state
  meter.reset_peak();
  memory_train_step(gpt, optimizer, x, y, setup);
  return meter.peak() - base;
}

CheckpointParity compare_checkpointed_step(const std::string& model, int64_t batch, int64_t seq,
                                           const c10::Device& device) {
  const GPTConfig config = checked_config(model, seq);
  StepSetup setup{batch, seq, std::nullopt, false};
  const auto [x, y] = random_batch(config, setup, device);
  GPT plain = build_model(config, device);
  const auto plain_loss = step_loss(plain, x, y, setup);
  plain_loss.backward();
  setup.checkpoint = true;
  GPT checkpointed = build_model(config, device);
  const auto checkpointed_loss = step_loss(checkpointed, x, y, setup);
  checkpointed_loss.backward();

  CheckpointParity parity{plain_loss.item<double>(), checkpointed_loss.item<double>()};
  const auto plain_params = plain->parameters();
  const auto checkpointed_params = checkpointed->parameters();
  for (size_t i = 0; i < plain_params.size(); ++i) {
    const auto& expected = plain_params[i].grad();
    const auto& got = checkpointed_params[i].grad();
    if (!got.defined()) {
      throw speedlabs::RuntimeFailure("the checkpointed step left a parameter without a gradient");
    }
    parity.max_grad_abs_error = std::max(parity.max_grad_abs_error, (got - expected).abs().max().item<double>());
    parity.max_grad_abs = std::max(parity.max_grad_abs, expected.abs().max().item<double>());
  }
  return parity;
}

// The plain and the checkpointed step timed in rounds side by side, so both see the same machine.
speedlabs::Interleaved time_steps(const std::string& model, const StepSetup& a, const StepSetup& b,
                                  const c10::Device& device, int warmup, int repeats) {
  const GPTConfig config = checked_config(model, a.seq);
  const auto batch = random_batch(config, a, device);
  GPT model_a = build_model(config, device);
  GPT model_b = build_model(config, device);
  auto optimizer_a = speedlabs::gpt::make_adamw(model_a, kLr);
  auto optimizer_b = speedlabs::gpt::make_adamw(model_b, kLr);
  return speedlabs::time_interleaved(
      {[&] {
         speedlabs::stop_if_asked("while timing the checkpointed step");  // Ctrl-C: between two steps
         memory_train_step(model_a, optimizer_a, batch.first, batch.second, a);
       },
       [&] { memory_train_step(model_b, optimizer_b, batch.first, batch.second, b); }},
      device, {warmup, repeats});
}

std::string write_phase_plot(const std::string& dir, const std::vector<std::pair<std::string, PhaseBytes>>& runs) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  const std::vector<std::string> names{"before", "weights", "after forward", "backward peak", "after backward",
                                       "AdamW step peak", "after AdamW step"};
  // One gnuplot data block per run: "phase_index MiB", with the run's name as the block's title.
  std::ostringstream data;
  for (const auto& [name, p] : runs) {
    data << "\"" << name << "\"\n";
    const std::vector<int64_t> bytes{0, p.weights, p.after_forward, p.backward_peak, p.after_backward, p.step_peak,
                                     p.after_step};
    for (size_t i = 0; i < bytes.size(); ++i) data << i << " " << mib(bytes[i]) << "\n";
    data << "\n\n";
  }
  std::ostringstream xtics;
  for (size_t i = 0; i < names.size(); ++i) xtics << (i ? ", " : "") << "\"" << names[i] << "\" " << i;
  // The script takes the data file and the SVG's name as arguments (ARG1, ARG2): names are data, not code.
  std::ostringstream script;
  script << "# Live tensor bytes over the phases of one training step (lab 08). Run: gnuplot -c memory_phases.gp "
            "memory_phases.dat memory_phases.svg\n"
         << "set terminal svg size 900,520 dynamic background rgb 'white'\n"
         << "set output ARG2\n"
         << "set title 'Where the memory of one training step goes'\n"
         << "set ylabel 'live tensor bytes (MiB)'\n"
         << "set xtics (" << xtics.str() << ") rotate by -20\n"
         << "set key top left\nset grid ytics\n"
         << "plot for [i=0:" << runs.size() - 1 << "] ARG1 index i using 1:2 with linespoints lw 2 title columnheader(1)\n";
  const fs::path script_path = fs::path(dir) / "memory_phases.gp";
  speedlabs::write_file_atomically(script_path.string(), script.str());
  std::string failure;
  const std::string svg = speedlabs::plot_svg(script_path.string(), dir, "memory_phases", data.str(), {}, failure);
  return svg.empty() ? "no plot: " + failure + "; the data is in " + (fs::path(dir) / "memory_phases.dat").string()
                     : "plot: " + svg;
}

namespace {

// The budget, checked before anything runs: not even B = 1 fitting is the user's input to fix.
int64_t checked_budget_bytes(const Config& config, const ModelShape& shape, const c10::Device& device) {
  // The budget is a share of this machine: more than it has would ask for a batch no run here can hold (and
  // a budget of exabytes would overflow the byte count).
  const auto total = speedlabs::total_memory_bytes(device);
  if (total && config.budget_mb * kMiB > static_cast<double>(*total)) {
    throw speedlabs::UsageError("--budget-mb " + std::to_string(static_cast<int64_t>(config.budget_mb)) +
                                " is more than " + (device.is_cpu() ? "this machine's" : device.str() + "'s") +
                                " memory (" + mib_text(*total) + "): give a budget it can hold");
  }
  const auto budget = static_cast<int64_t>(config.budget_mb * kMiB);
  const int64_t smallest = step_peak_bytes_formula(shape, 1, config.seq, /*checkpoint=*/true);
  if (smallest > budget) {
    const int64_t state = weights_bytes_formula(shape) + grads_bytes_formula(shape) + adamw_state_bytes_formula(shape);
    std::ostringstream message;
    message << "--budget-mb " << config.budget_mb << " is too small: even batch 1 of " << config.seq
            << " tokens needs " << mib_text(smallest) << " with checkpointing (weights, gradients and AdamW state alone: "
            << mib_text(state) << "); give at least " << std::ceil(mib(smallest));
    throw speedlabs::UsageError(message.str());
  }
  return budget;
}

void print_phases(const std::string& title, const PhaseBytes& p) {
  std::cout << "  " << std::left << std::setw(34) << title << std::right << " weights " << std::setw(9)
            << std::fixed << std::setprecision(2) << mib(p.weights) << "  after fwd " << std::setw(9)
            << mib(p.after_forward) << "  bwd peak " << std::setw(9) << mib(p.backward_peak) << "  after bwd "
            << std::setw(9) << mib(p.after_backward) << "  after AdamW " << std::setw(9) << mib(p.after_step)
            << " MiB";
  if (p.reserved) std::cout << "  (reserved " << mib(*p.reserved) << ")";
  std::cout << "\n";
}

// Measured against a formula that should be exact: on a GPU the caching allocator rounds every tensor
// up to 512 bytes, so there the measured bytes may exceed the formula by that much per tensor.
void check_exact(speedlabs::Report& report, const std::string& id, const std::string& what, int64_t measured,
                 int64_t predicted, int64_t tensors, const c10::Device& device) {
  const int64_t slack = device.is_cpu() ? 0 : kCudaRounding * tensors;
  const bool holds = measured >= predicted && measured <= predicted + slack;
  const std::string rule = device.is_cpu() ? "exactly " + std::to_string(predicted) + " bytes"
                                           : std::to_string(predicted) + " bytes, up to 512 B per tensor more "
                                                                         "(the caching allocator's rounding)";
  report.check(id, what + " measured by the allocator equal the formula",
               json{{"measured_bytes", measured}, {"formula_bytes", predicted},
                    {"ratio", static_cast<double>(measured) / static_cast<double>(predicted)}},
               rule, holds);
}

// Measured activations may exceed the formula by the small tensors it leaves out (LayerNorm statistics,
// the causal masks, the RNG state, the loss): a few percent; less than the formula never.
constexpr double kActivationFactor = 1.10;

void run_phases(const Config& config, const ModelShape& shape, const c10::Device& device, speedlabs::Report& report,
                std::vector<std::pair<std::string, PhaseBytes>>& plotted) {
  std::cout << "\n== The step, phase by phase (" << config.model << ", B=" << config.batch << ", T=" << config.seq
            << ", N=" << shape.params << " parameters) ==\n";
  const PhaseBytes fp32 = measure_phases(config.model, {config.batch, config.seq, std::nullopt, false}, device);
  print_phases("float32", fp32);
  plotted.emplace_back("float32", fp32);

  check_exact(report, "weights_bytes_match_formula", "weights (4 N bytes)", fp32.weights,
              weights_bytes_formula(shape), shape.tensors, device);
  check_exact(report, "grads_bytes_match_formula", "gradients after backward (4 N bytes)", fp32.grads(),
              grads_bytes_formula(shape), shape.tensors, device);
  check_exact(report, "adamw_state_bytes_match_formula", "AdamW's two moments after the first step (8 N bytes)",
              fp32.adamw_state(), adamw_state_bytes_formula(shape), 2 * shape.tensors, device);

  const int64_t predicted = activations_bytes_formula(shape, config.batch, config.seq, false);
  const double ratio = static_cast<double>(fp32.activations()) / static_cast<double>(predicted);
  const int64_t logprobs = kFloat * config.batch * config.seq * shape.vocab;
  std::cout << "  activations: measured " << mib_text(fp32.activations()) << ", formula " << mib_text(predicted)
            << " (ratio " << std::setprecision(3) << ratio << "); of the formula, the log-probabilities (B x T x V x 4) are "
            << mib_text(logprobs) << "\n";
  std::ostringstream rule;
  rule << "between 1.00x and " << kActivationFactor << "x the formula (it leaves out LayerNorm statistics and masks)";
  report.check("activations_within_formula", "the activations saved by the forward are what the layer shapes predict",
               json{{"measured_bytes", fp32.activations()}, {"formula_bytes", predicted}, {"ratio", ratio},
                    {"logprobs_bytes", logprobs}},
               rule.str(), ratio >= 1.0 && ratio <= kActivationFactor);

  std::cout << "\n== Precision and memory ==\n";
  if (!speedlabs::autocast_supported(device, c10::kBFloat16)) {
    report.not_applicable("bf16_autocast_activation_bytes_vs_fp32",
                          "under bf16 autocast the matmuls save bf16 inputs (half the bytes)",
                          "reported; without the weight copies below 1x float32's",
                          "no bf16 autocast on " + device.str(), false);
  } else {
    const PhaseBytes bf16 = measure_phases(config.model, {config.batch, config.seq, c10::kBFloat16, false}, device);
    print_phases("bf16 autocast", bf16);
    plotted.emplace_back("bf16 autocast", bf16);
    const double bf16_ratio = static_cast<double>(bf16.activations()) / static_cast<double>(fp32.activations());
    // Autocast's bf16 copies of the matmul weights are saved for the backward too: 2 bytes per such weight.
    const int64_t copies = 2 * shape.matmul_params;
    const double without_copies =
        static_cast<double>(bf16.activations() - copies) / static_cast<double>(fp32.activations());
    std::cout << "  activations bf16/fp32: " << std::setprecision(3) << bf16_ratio << ", of which bf16 weight copies "
              << mib_text(copies) << "; without them " << without_copies
              << ". Weights, gradients and AdamW state unchanged: " << mib_text(bf16.after_step) << " vs "
              << mib_text(fp32.after_step) << " after the step\n";
    report.check("bf16_autocast_activation_bytes_vs_fp32",
                 "under bf16 autocast the matmuls save bf16 inputs (half the bytes), LayerNorm inputs and the loss's "
                 "log-probabilities stay float32, and autocast adds bf16 copies of the weights (2 B per parameter)",
                 json{{"ratio", bf16_ratio}, {"ratio_without_weight_copies", without_copies},
                      {"weight_copy_bytes", copies}, {"bf16_bytes", bf16.activations()},
                      {"fp32_bytes", fp32.activations()}},
                 "reported; without the weight copies below 1x float32's", without_copies < 1.0, false);
  }

  std::cout << "\n  Training memory for 7B parameters (extends lab 02: weights alone 28 GB in float32, 14 GB in 16 bits),"
               " activations not included:\n";
  constexpr double kParams7B = 7e9;
  for (const auto& row : training_memory_table()) {
    std::cout << "    " << std::left << std::setw(74) << row.recipe << std::right << std::setw(4) << std::fixed
              << std::setprecision(0) << row.per_param() << " B/param  " << std::setw(5)
              << row.per_param() * kParams7B / 1e9 << " GB\n";
  }
  std::cout << std::setprecision(2);
}

void run_checkpointing(const Config& config, const c10::Device& device, speedlabs::Report& report,
                       std::vector<std::pair<std::string, PhaseBytes>>& plotted) {
  std::cout << "\n== Activation checkpointing (every block recomputed in backward) ==\n";
  json peaks = json::object(), times = json::object();
  bool cuts = true;
  std::vector<double> round_ratios;  // checkpointed over plain, each round of every sequence length
  std::vector<speedlabs::Bound> bounds;
  speedlabs::Contention contention;
  for (const int64_t seq : config.checkpoint_seqs) {
    const StepSetup plain{config.batch, seq, std::nullopt, false};
    const StepSetup checkpointed{config.batch, seq, std::nullopt, true};
    const PhaseBytes a = measure_phases(config.model, plain, device);
    const PhaseBytes b = measure_phases(config.model, checkpointed, device);
    print_phases("T=" + std::to_string(seq) + " plain", a);
    print_phases("T=" + std::to_string(seq) + " checkpointed", b);
    if (seq == config.checkpoint_seqs.back()) plotted.emplace_back("float32 checkpointed, T=" + std::to_string(seq), b);
    cuts = cuts && b.activations() < a.activations();
    const auto steps = time_steps(config.model, plain, checkpointed, device, config.warmup, config.repeats);
    const double plain_ms = steps.sides[0].median_ms, checkpointed_ms = steps.sides[1].median_ms;
    const double ratio = steps.ratio(1, 0).median;
    for (size_t r = 0; r < steps.sides[0].samples_ms.size(); ++r) {
      round_ratios.push_back(steps.sides[1].samples_ms[r] / steps.sides[0].samples_ms[r]);
    }
    // The checkpointed step does all of the plain step's work and one more forward of the blocks: it cannot
    // take less time than the plain step (20% allowed for noise), nor more than about twice as long.
    bounds.push_back({"checkpointed/plain step time at T=" + std::to_string(seq), ratio, 0.8, 3.0});
    // The busiest of the sequence lengths' windows speaks for the whole observation.
    if (contention.wall_s == 0 || steps.contention.others_cores > contention.others_cores) contention = steps.contention;
    std::cout << "  T=" << seq << ": step " << plain_ms << " ms plain, " << checkpointed_ms << " ms checkpointed ("
              << ratio << "x)\n";
    const std::string key = "T" + std::to_string(seq);
    peaks[key] = {{"plain_peak_bytes", a.backward_peak}, {"checkpointed_peak_bytes", b.backward_peak},
                  {"plain_activation_bytes", a.activations()}, {"checkpointed_activation_bytes", b.activations()}};
    times[key] = {{"plain_ms", plain_ms}, {"checkpointed_ms", checkpointed_ms}, {"ratio", ratio}};
  }
  // The activations peak when the forward ends: what it saved is all there, and nothing of the backward yet.
  // The step's own peak may not move: on the tiny model it comes at the end of backward, when the token
  // embedding's two gradients (from the lm_head and from the lookup) are summed and the activations are gone.
  report.check("checkpointing_cuts_activation_peak",
               "checkpointing every block lowers the activations the forward leaves for the backward", peaks,
               "checkpointed < plain at every sequence length (backward peaks reported beside)", cuts);
  speedlabs::Evidence evidence;
  evidence.value = speedlabs::summarize_samples(round_ratios);
  evidence.contention = contention;
  evidence.bounds = bounds;
  report.decide("checkpointing_step_time_ratio", "checkpointing costs one more forward of the blocks", times,
                "between 1x and 2x the plain step, per round (about 1.3x where the blocks dominate; reported)",
                evidence, [](double ratio) { return ratio >= 1.0 && ratio <= 2.0; }, false);

  const CheckpointParity parity = compare_checkpointed_step(config.model, config.batch, config.seq, device);
  // The recomputation runs the same float32 kernels on the same inputs, so it reproduces the forward's
  // activations bit for bit; only the order in which gradient contributions are summed may differ,
  // which moves a result by a few float32 ulps (2^-23 relative each): 1e-5 of the largest gradient
  // bounds that with room, and is far below what a wrong recomputation (another mask, no autocast) makes.
  constexpr double kRelativeTolerance = 1e-5;
  const double loss_error = std::abs(parity.checkpointed_loss - parity.plain_loss);
  const bool same = loss_error <= kRelativeTolerance * std::abs(parity.plain_loss) &&
                    parity.max_grad_abs_error <= kRelativeTolerance * parity.max_grad_abs;
  std::cout << "  same step: loss " << std::setprecision(7) << parity.plain_loss << " plain, "
            << parity.checkpointed_loss << " checkpointed; largest gradient difference " << std::scientific
            << parity.max_grad_abs_error << " (largest gradient " << parity.max_grad_abs << ")\n"
            << std::defaultfloat << std::setprecision(6);
  report.check("checkpointing_same_loss_and_grads", "the checkpointed step computes the plain step's loss and gradients",
               json{{"plain_loss", parity.plain_loss}, {"checkpointed_loss", parity.checkpointed_loss},
                    {"max_grad_abs_error", parity.max_grad_abs_error}, {"max_grad_abs", parity.max_grad_abs}},
               "loss and every gradient within 1e-5 of their scale (float32 summation order)", same);
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

}  // namespace

void run(const Config& config, const c10::Device& device, speedlabs::Report& report) {
  speedlabs::install_stop_handlers();  // Ctrl-C or SIGTERM: stop between two timed rounds
  checked_config(config.model, config.seq);
  for (const int64_t seq : config.checkpoint_seqs) checked_config(config.model, seq);
  Meter meter(device);  // refuses a device it cannot measure before anything runs
  const ModelShape shape = model_shape(config.model);
  const int64_t budget = checked_budget_bytes(config, shape, device);
  // Step times are compared below: freed buffers kept in the heap, not page-faulted in again every step.
  std::cout << speedlabs::keep_freed_host_memory() << "\n";
  std::cout << (device.is_cpu() ? "measured by the counting CPU allocator (common/host_memory.h)"
                                : "measured by the CUDA caching allocator's statistics")
            << ": bytes held by tensors\n";

  std::vector<std::pair<std::string, PhaseBytes>> plotted;
  run_phases(config, shape, device, report, plotted);
  run_checkpointing(config, device, report, plotted);
  run_budget(config, shape, budget, device, report);
  if (!config.results_dir.empty()) std::cout << "\n" << write_phase_plot(config.results_dir, plotted) << "\n";
}

}  // namespace lab08
