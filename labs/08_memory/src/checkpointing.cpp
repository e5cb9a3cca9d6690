// Lab 08, part 2: activation checkpointing; the activations it saves, the time it costs, and the same
// loss and gradients.
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <optional>
#include <vector>

#include "common/errors.h"
#include "parts.h"

namespace lab08 {

using json = nlohmann::json;
using speedlabs::gpt::GPT;
using speedlabs::gpt::GPTConfig;

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

namespace {

// The checkpointed step's loss and gradients against the plain step's, on the same weights and tokens.
void check_same_step(const Config& config, const c10::Device& device, speedlabs::Report& report) {
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
  report.check("checkpointing_loss_and_grads", "the checkpointed step computes the plain step's loss and gradients",
               json{{"plain_loss", parity.plain_loss},
                    {"checkpointed_loss", parity.checkpointed_loss},
                    {"max_grad_abs_error", parity.max_grad_abs_error},
                    {"max_grad_abs", parity.max_grad_abs}},
               "loss and every gradient within 1e-5 of their scale (float32 summation order)", same);
}

}  // namespace

void run_checkpointing(const Config& config, const c10::Device& device, speedlabs::Report& report,
                       PlottedRuns& plotted) {
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
    if (contention.wall_s == 0 || steps.contention.others_cores > contention.others_cores)
      contention = steps.contention;
    std::cout << "  T=" << seq << ": step " << plain_ms << " ms plain, " << checkpointed_ms << " ms checkpointed ("
              << ratio << "x)\n";
    const std::string key = "T" + std::to_string(seq);
    peaks[key] = {{"plain_peak_bytes", a.backward_peak},
                  {"checkpointed_peak_bytes", b.backward_peak},
                  {"plain_activation_bytes", a.activations()},
                  {"checkpointed_activation_bytes", b.activations()}};
    times[key] = {{"plain_ms", plain_ms}, {"checkpointed_ms", checkpointed_ms}, {"ratio", ratio}};
  }
  // The activations peak when the forward ends: what it saved is all there, and nothing of the backward yet.
  // The step's own peak may not move: on the tiny model it comes at the end of backward, when the token
  // embedding's two gradients (from the lm_head and from the lookup) are summed and the activations are gone.
  report.check("checkpointing_cuts_activation_peak",
               "checkpointing every block lowers the activations the forward leaves for the backward", peaks,
               "checkpointed < plain at every sequence length (backward peaks reported beside)", cuts);
  speedlabs::Evidence evidence(speedlabs::summarize_samples(round_ratios), contention,
                               speedlabs::LoadEffect::ratio);  // both steps of a round interleaved on the same cores
  evidence.bounds = bounds;
  report.decide(
      "checkpointing_step_time_ratio", "checkpointing costs one more forward of the blocks", times,
      "between 1x and 2x the plain step, per round (about 1.3x where the blocks dominate; reported)", evidence,
      [](double ratio) { return ratio >= 1.0 && ratio <= 2.0; }, false);
  check_same_step(config, device, report);
}

}  // namespace lab08
