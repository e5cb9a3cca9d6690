// Lab 08, part 1: the step, phase by phase; the bytes of each phase against its formula, in float32 and
// under bf16 autocast.
#include <torch/types.h>

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "common/autocast_guard.h"
#include "common/files.h"
#include "common/memory.h"
#include "common/plot.h"
#include "common/table.h"
#include "labs/05_gpt2/exercise.h"
#include "parts.h"

namespace lab08 {

using json = nlohmann::json;
using speedlabs::gpt::GPT;
using speedlabs::gpt::GPTConfig;

namespace {

constexpr int64_t kCudaRounding = 512;  // the CUDA caching allocator rounds every block up to 512 bytes

}  // namespace

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
  const int64_t backward =
      activations_bytes_formula(shape, batch, seq, checkpoint) + 2 * kFloat * batch * seq * shape.vocab;
  // AdamW's update makes two temporaries the size of the parameter it updates (sqrt, then a division).
  const int64_t update = 2 * kFloat * shape.largest_param;
  return state + std::max(backward, update);
}

std::vector<TrainingMemoryRow> training_memory_table() {
  return {{"float32 weights, gradients and AdamW", 4, 0, 4, 8},
          {"bf16 autocast (this lab): float32 everything, bf16 copies cast on the fly", 4, 0, 4, 8},
          {"mixed precision: bf16 weights and gradients, float32 master weights", 2, 4, 2, 8},
          {"everything in bf16 (no master weights)", 2, 0, 2, 4}};
}

PhaseBytes measure_phases(const std::string& model, const StepSetup& setup, const c10::Device& device) {
  const GPTConfig config = checked_config(model, setup.seq);
  speedlabs::TensorMemoryMeter meter(device);
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

std::string write_phase_plot(const std::string& dir, const std::vector<std::pair<std::string, PhaseBytes>>& runs) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  const std::vector<std::string> names{"before",         "weights",         "after forward",   "backward peak",
                                       "after backward", "AdamW step peak", "after AdamW step"};
  // One gnuplot data block per run: "phase_index MiB", with the run's name as the block's title.
  std::ostringstream data;
  for (const auto& [name, p] : runs) {
    data << "\"" << name << "\"\n";
    const std::vector<int64_t> bytes{0,           p.weights,   p.after_forward, p.backward_peak, p.after_backward,
                                     p.step_peak, p.after_step};
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
         << "plot for [i=0:" << runs.size() - 1
         << "] ARG1 index i using 1:2 with linespoints lw 2 title columnheader(1)\n";
  const fs::path script_path = fs::path(dir) / "memory_phases.gp";
  speedlabs::write_file_atomically(script_path.string(), script.str());
  std::string failure;
  const std::string svg = speedlabs::plot_svg(script_path.string(), dir, "memory_phases", data.str(), {}, failure);
  return svg.empty() ? "no plot: " + failure + "; the data is in " + (fs::path(dir) / "memory_phases.dat").string()
                     : "plot: " + svg;
}

void print_phases(const std::string& title, const PhaseBytes& p) {
  std::cout << "  " << std::left << std::setw(34) << title << std::right << " weights " << std::setw(9) << std::fixed
            << std::setprecision(2) << mib(p.weights) << "  after fwd " << std::setw(9) << mib(p.after_forward)
            << "  bwd peak " << std::setw(9) << mib(p.backward_peak) << "  after bwd " << std::setw(9)
            << mib(p.after_backward) << "  after AdamW " << std::setw(9) << mib(p.after_step) << " MiB";
  if (p.reserved) std::cout << "  (reserved " << mib(*p.reserved) << ")";
  std::cout << "\n";
}

namespace {

// Measured against a formula that should be exact: on a GPU the caching allocator rounds every tensor
// up to 512 bytes, so there the measured bytes may exceed the formula by that much per tensor.
void check_exact(speedlabs::Report& report, const std::string& id, const std::string& what, int64_t measured,
                 int64_t predicted, int64_t tensors, const c10::Device& device) {
  const int64_t slack = device.is_cpu() ? 0 : kCudaRounding * tensors;
  const bool holds = measured >= predicted && measured <= predicted + slack;
  const std::string rule = device.is_cpu() ? "exactly " + std::to_string(predicted) + " bytes"
                                           : std::to_string(predicted) +
                                                 " bytes, up to 512 B per tensor more "
                                                 "(the caching allocator's rounding)";
  report.check(id, what + " measured by the allocator equal the formula",
               json{{"measured_bytes", measured},
                    {"formula_bytes", predicted},
                    {"ratio", static_cast<double>(measured) / static_cast<double>(predicted)}},
               rule, holds);
}

// Measured activations may exceed the formula by the small tensors it leaves out (LayerNorm statistics,
// the causal masks, the RNG state, the loss): a few percent; less than the formula never.
constexpr double kActivationFactor = 1.10;

// Under bf16 autocast the matmuls save bf16 inputs; the step's other bytes do not change.
void run_precision(const Config& config, const ModelShape& shape, const PhaseBytes& fp32, const c10::Device& device,
                   speedlabs::Report& report, PlottedRuns& plotted) {
  std::cout << "\n== Precision and memory ==\n";
  if (!speedlabs::autocast_supported(device, c10::kBFloat16)) {
    report.not_applicable(
        "bf16_autocast_activation_bytes_vs_fp32", "under bf16 autocast the matmuls save bf16 inputs (half the bytes)",
        "reported; without the weight copies below 1x float32's", "no bf16 autocast on " + device.str(), false);
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
                 json{{"ratio", bf16_ratio},
                      {"ratio_without_weight_copies", without_copies},
                      {"weight_copy_bytes", copies},
                      {"bf16_bytes", bf16.activations()},
                      {"fp32_bytes", fp32.activations()}},
                 "reported; without the weight copies below 1x float32's", without_copies < 1.0, false);
  }
}

// Training memory per parameter for a 7B model, recipe by recipe (activations left out).
void print_training_memory_table() {
  std::cout
      << "\n  Training memory for 7B parameters (extends lab 02: weights alone 28 GB in float32, 14 GB in 16 bits),"
         " activations not included:\n";
  constexpr double kParams7B = 7e9;
  speedlabs::Table table("    ");  // no header: the units follow each number
  table.left("recipe", 74).right("per parameter", 12, speedlabs::fixed_digits(0, " B/param"));
  table.gap(2).right("for 7B", 8, speedlabs::fixed_digits(0, " GB"));
  for (const auto& row : training_memory_table()) {
    table.print_row(std::cout, {row.recipe, row.per_param(), row.per_param() * kParams7B / 1e9});
  }
}

}  // namespace

void run_phases(const Config& config, const ModelShape& shape, const c10::Device& device, speedlabs::Report& report,
                PlottedRuns& plotted) {
  std::cout << "\n== The step, phase by phase (" << config.model << ", B=" << config.batch << ", T=" << config.seq
            << ", N=" << shape.params << " parameters) ==\n";
  const PhaseBytes fp32 = measure_phases(config.model, {config.batch, config.seq, std::nullopt, false}, device);
  print_phases("float32", fp32);
  plotted.emplace_back("float32", fp32);

  check_exact(report, "weights_bytes_match_formula", "weights (4 N bytes)", fp32.weights, weights_bytes_formula(shape),
              shape.tensors, device);
  check_exact(report, "grads_bytes_match_formula", "gradients after backward (4 N bytes)", fp32.grads(),
              grads_bytes_formula(shape), shape.tensors, device);
  check_exact(report, "adamw_state_bytes_match_formula", "AdamW's two moments after the first step (8 N bytes)",
              fp32.adamw_state(), adamw_state_bytes_formula(shape), 2 * shape.tensors, device);

  const int64_t predicted = activations_bytes_formula(shape, config.batch, config.seq, false);
  const double ratio = static_cast<double>(fp32.activations()) / static_cast<double>(predicted);
  const int64_t logprobs = kFloat * config.batch * config.seq * shape.vocab;
  std::cout << "  activations: measured " << mib_text(fp32.activations()) << ", formula " << mib_text(predicted)
            << " (ratio " << std::setprecision(3) << ratio
            << "); of the formula, the log-probabilities (B x T x V x 4) are " << mib_text(logprobs) << "\n";
  std::ostringstream rule;
  rule << "between 1.00x and " << kActivationFactor << "x the formula (it leaves out LayerNorm statistics and masks)";
  report.check("activations_within_formula", "the activations saved by the forward are what the layer shapes predict",
               json{{"measured_bytes", fp32.activations()},
                    {"formula_bytes", predicted},
                    {"ratio", ratio},
                    {"logprobs_bytes", logprobs}},
               rule.str(), ratio >= 1.0 && ratio <= kActivationFactor);
  run_precision(config, shape, fp32, device, report, plotted);
  print_training_memory_table();
}

}  // namespace lab08
