#include "experiment.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <sstream>

#include "common/autocast_guard.h"
#include "common/curves.h"
#include "common/device.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/format.h"
#include "common/gpt.h"
#include "common/process.h"
#include "common/sequential.h"
#include "common/table.h"
#include "datasets/data_files.h"
#include "datasets/data_loader.h"
#include "datasets/token_cache.h"
#include "mfu.h"
#include "tf32_probe.h"
#include "training.h"

namespace lab05 {

using speedlabs::fixed;
using speedlabs::Precision;
namespace gpt = speedlabs::gpt;

int warmup_steps(int steps) { return std::max(1, steps / 10); }

namespace {

constexpr const char* kFirstStepClaim =
    "the first training step is slower than the steady ones (the chapter's A100: 43 ms against 36 ms)";

}  // namespace

speedlabs::Summary timed_steps(const ModeResult& r, const Config& config) {
  std::vector<double> ms;
  for (const auto& s : r.steps) {
    if (s.step >= warmup_steps(config.steps)) ms.push_back(s.ms);
  }
  if (ms.empty()) ms.push_back(r.steps.back().ms);  // a one-step run: its warm-up step, a single sample
  return speedlabs::summarize_samples(ms);
}

namespace {

// How far a mode's loss may stray from fp32's at the same step. Not the rounding of the loss itself: autocast
// computes the cross-entropy in float32, from logits a 16-bit matmul rounded (bf16: at most 2^-8 relative,
// about 1e-3 on a logit of size 0.5). A token's loss moves by its target logit's error (the softmax's average
// over 50,257 logits cancels the rest), and the mean over B*T = 512 independent tokens shrinks that by
// sqrt(512): about 1e-4 at step 0, as the chapter's A100 logs show (6e-5 for bf16, 9e-5 for tf32). The gap
// that matters comes later: different roundings give slightly different updates, and the runs drift apart,
// to 0.09 nat (bf16) and 0.04 (tf32) over 100 steps in those logs. 0.25 leaves room for that drift on other
// hardware and still catches a broken mode: a wrong cast, a missing scaler or an unscaled gradient moves the
// loss by whole nats.
constexpr double kTrackTolerance = 0.25;
// The initial loss of a model that guesses uniformly is ln(vocab); small random logits add a little.
constexpr double kLnVocabTolerance = 0.3;
// Training must lower the loss by at least this much (mean of the last 10% of steps vs step 0).
constexpr double kMinLossDrop = 0.5;

std::string megabytes(std::optional<int64_t> bytes) {
  return bytes ? fixed(speedlabs::to_mib(static_cast<double>(*bytes)), 1) + " MiB" : "n/a";
}

// Why a mode cannot run here, or "" when it can.
std::string why_not_runnable(Precision mode, const c10::Device& device) {
  if (mode != Precision::bf16 && mode != Precision::fp16) return "";
  const auto dtype = mode == Precision::bf16 ? c10::kBFloat16 : c10::kHalf;  // the 16-bit type the mode is named after
  if (!speedlabs::autocast_supported(device, dtype)) {
    return "autocast to " + std::string(c10::toString(dtype)) + " is not supported on " + device.str() +
           " by this libtorch";
  }
  return "";
}

// What the table and the observations say about TF32 where it has no effect.
std::string tf32_note(const c10::Device& device) {
  return device.is_cuda() ? ""
                          : "TF32 is a math mode of NVIDIA tensor cores; on " + device.str() +
                                " the 'high' float32 matmul precision changes nothing";
}

const ModeResult* find(const std::vector<ModeResult>& results, Precision mode) {
  for (const auto& r : results) {
    if (r.mode == mode) return &r;
  }
  return nullptr;
}

// Largest |loss - fp32 loss| over the logged steps; NaN when either run has a non-finite logged loss.
double max_loss_gap(const ModeResult& mode, const ModeResult& fp32, const Config& config) {
  std::vector<double> mine, reference;
  for (size_t i = 0; i < std::min(mode.steps.size(), fp32.steps.size()); ++i) {
    if (!logged(mode.steps[i].step, config)) continue;
    mine.push_back(mode.steps[i].loss);
    reference.push_back(fp32.steps[i].loss);
  }
  return speedlabs::max_abs_gap(mine, reference);
}

// @p slower's step time over @p faster's at the same step, for every timed step (after the warm-up; a
// one-step run: its only step), summarised: the per-round ratios of two modes trained round-robin.
speedlabs::Summary paired_step_ratios(const ModeResult& slower, const ModeResult& faster, const Config& config) {
  std::vector<double> ratios;
  const size_t n = std::min(slower.steps.size(), faster.steps.size());
  for (size_t i = 0; i < n; ++i) {
    if (slower.steps[i].step >= warmup_steps(config.steps)) ratios.push_back(slower.steps[i].ms / faster.steps[i].ms);
  }
  if (ratios.empty()) ratios.push_back(slower.steps[n - 1].ms / faster.steps[n - 1].ms);
  return speedlabs::summarize_samples(ratios);
}

double mean_of_last_steps(const ModeResult& r) {
  const size_t n = std::min(r.steps.size(), static_cast<size_t>(warmup_steps(static_cast<int>(r.steps.size()))));
  double sum = 0;
  for (size_t i = r.steps.size() - n; i < r.steps.size(); ++i) sum += r.steps[i].loss;
  return sum / static_cast<double>(n);
}

void print_comparison(const std::vector<ModeResult>& results, const std::map<Precision, std::string>& skipped,
                      const c10::Device& device, const Config& config) {
  const ModeResult* fp32 = find(results, Precision::fp32);
  speedlabs::Table table;
  table.left("mode", 6).right("tokens/s", 12, speedlabs::fixed_digits(0)).right("speed-up", 10).right("max|dloss|", 14);
  table.right("peak mem", 13).gap(2).left("note", 0);
  for (const auto& r : results) {
    std::string note;
    if (r.mode == Precision::tf32) note = tf32_note(device);
    if (r.mode == Precision::fp16) {
      note = "loss scaled (final scale " + fixed(r.final_loss_scale, 0) + "), " +
             std::to_string(r.nonfinite_fp16_steps) + " overflowed steps skipped";
    }
    table.add_row({speedlabs::to_string(r.mode), r.tokens_per_s,
                   fp32 ? fixed(r.tokens_per_s / fp32->tokens_per_s, 2) + "x" : "n/a",
                   fp32 ? fixed(max_loss_gap(r, *fp32, config), 4) : "n/a", megabytes(r.peak_bytes), note});
  }
  // A mode that did not run says so where its numbers would end.
  for (const auto& [mode, reason] : skipped) table.add_row({speedlabs::to_string(mode), "", "", "", "not run", reason});
  std::cout << "\n";
  table.print(std::cout);
  std::cout << "  (tokens/s from the median step after " << warmup_steps(config.steps)
            << " warm-up step(s); max|dloss| over the logged steps"
            << (device.is_cpu() ? "; the CPU allocator keeps no peak-memory statistics" : "") << ")\n";
}

// loss_at_step_0 and loss_decreases: where training starts, and that it learns.
void record_losses(const std::vector<ModeResult>& results, const ModeResult& baseline, const Config& config,
                   speedlabs::Report& report) {
  const double ln_vocab = std::log(static_cast<double>(gpt::GPTConfig::by_name(config.model).vocab_size));
  const double initial = baseline.steps.front().loss;
  report.check("loss_at_step_0",
               "before training the model guesses almost uniformly over the 50,257 tokens, so the step-0 loss "
               "(" +
                   speedlabs::to_string(baseline.mode) + ") is close to ln(50257)",
               initial, "|loss - " + fixed(ln_vocab, 3) + "| <= " + fixed(kLnVocabTolerance, 1),
               std::abs(initial - ln_vocab) <= kLnVocabTolerance);

  nlohmann::json drops;
  bool all_drop = true;
  for (const auto& r : results) {
    const double drop = r.steps.front().loss - mean_of_last_steps(r);
    drops[speedlabs::to_string(r.mode)] = {{"step0", r.steps.front().loss}, {"last_mean", mean_of_last_steps(r)}};
    all_drop = all_drop && drop >= kMinLossDrop;  // a NaN drop compares false
  }
  report.check("loss_decreases", "training lowers the loss in every mode (mean of the last 10% of steps vs step 0)",
               drops, "drop >= " + fixed(kMinLossDrop, 1) + " nat in every mode", all_drop);
}

// modes_vs_fp32 and master_weights_dtype: lower precision changes the arithmetic, not the run.
void record_precision_effects(const std::vector<ModeResult>& results, const Config& config, speedlabs::Report& report) {
  const ModeResult* fp32 = find(results, Precision::fp32);
  if (fp32 && results.size() > 1) {
    nlohmann::json gaps;
    bool all_track = true;
    for (const auto& r : results) {
      if (r.mode == Precision::fp32) continue;
      const double gap = max_loss_gap(r, *fp32, config);
      gaps[speedlabs::to_string(r.mode)] = std::isfinite(gap) ? nlohmann::json(gap) : nlohmann::json("non-finite");
      all_track = all_track && gap <= kTrackTolerance;
    }
    report.check("modes_vs_fp32",
                 "the lower-precision modes follow fp32's loss curve: same weights, same batches, only rounding "
                 "differs (tolerance: the drift of 100 steps of slightly different updates; the chapter's A100 "
                 "logs stay within 0.09)",
                 gaps, "max |loss - fp32 loss| over the logged steps <= " + fixed(kTrackTolerance, 2), all_track);
  } else {
    report.not_applicable("modes_vs_fp32", "the lower-precision modes follow fp32's loss curve",
                          "max |loss - fp32 loss| <= " + fixed(kTrackTolerance, 2),
                          "needs fp32 and another mode: run with --precision all");
  }

  nlohmann::json dtypes;
  bool all_float = true;
  for (const auto& r : results) {
    dtypes[speedlabs::to_string(r.mode)] = r.weight_dtypes;
    all_float = all_float && r.weight_dtypes == std::vector<std::string>{"Float"};
  }
  report.check("master_weights_dtype",
               "autocast changes the dtype of the step's arithmetic, not of the weights: every parameter is "
               "still float32 after training in every mode",
               dtypes, "only Float", all_float);
}

// tokens_per_s_<mode>: each mode's rate carries its steps' spread (the rate of every timed step: median and
// quartiles) and the machine's reading over the training (all modes train side by side, so one reading).
void record_rates(const std::vector<ModeResult>& results, const std::map<Precision, std::string>& skipped,
                  const Config& config, speedlabs::Report& report) {
  const double tokens_per_step = static_cast<double>(config.batch * config.seq);
  for (const auto& r : results) {
    speedlabs::Evidence evidence(speedlabs::rate_of(timed_steps(r, config), tokens_per_step), r.contention,
                                 speedlabs::LoadEffect::rate);  // CPU-bound steps: a load only lowers the rate
    evidence.bounds = {speedlabs::positive_finite("tokens/s", r.tokens_per_s)};
    report.decide(
        "tokens_per_s_" + speedlabs::to_string(r.mode),
        "training throughput in " + speedlabs::to_string(r.mode) + " (B*T / median step time)", r.tokens_per_s,
        "> 0, reported", evidence, [](double rate) { return std::isfinite(rate) && rate > 0; }, false);
  }
  for (const auto& [mode, reason] : skipped) {
    report.not_applicable("tokens_per_s_" + speedlabs::to_string(mode),
                          "training throughput in " + speedlabs::to_string(mode), "> 0, reported", reason, false);
  }
}

// tf32_faster_than_fp32 and tf32_differs_slightly_from_fp32: decided on a GPU with both modes, else said why not.
void record_tf32(const std::vector<ModeResult>& results, const Config& config, const c10::Device& device,
                 speedlabs::Report& report) {
  const ModeResult* fp32 = find(results, Precision::fp32);
  const ModeResult* tf32 = find(results, Precision::tf32);
  const std::string faster_claim = "TF32 tensor cores make the float32 matmuls faster (the chapter: ~1.5x on an A100)";
  const std::string differs_claim =
      "TF32 rounds matmul inputs to 10 mantissa bits, so its losses differ from fp32's, but only slightly";
  const std::string differs_expected = "0 < max |loss - fp32 loss| <= " + fixed(kTrackTolerance, 2);
  if (!device.is_cuda()) {
    const std::string gap =
        (fp32 && tf32) ? " (measured max |dloss| = " + fixed(max_loss_gap(*tf32, *fp32, config), 6) + ")" : "";
    report.not_applicable("tf32_faster_than_fp32", faster_claim, "tf32 tokens/s > fp32 tokens/s", tf32_note(device));
    report.not_applicable("tf32_differs_slightly_from_fp32", differs_claim, differs_expected, tf32_note(device) + gap);
    return;
  }
  if (!fp32 || !tf32) {
    const std::string reason = "needs fp32 and tf32: run with --precision all";
    report.not_applicable("tf32_faster_than_fp32", faster_claim, "tf32 tokens/s > fp32 tokens/s", reason);
    report.not_applicable("tf32_differs_slightly_from_fp32", differs_claim, differs_expected, reason);
    return;
  }
  // Interleaved: the modes train round-robin, step by step, so fp32's step s and tf32's step s ran one
  // right after the other; the ratio is taken within each such pair (fp32's time over tf32's: tf32's
  // speed-up) and summarised over the timed steps, under the reading of the whole run.
  const speedlabs::Summary ratios = paired_step_ratios(*fp32, *tf32, config);
  const double speedup = ratios.median;
  speedlabs::Evidence evidence(ratios, fp32->contention,
                               speedlabs::LoadEffect::ratio);  // each pair of steps ran one right after the other
  evidence.bounds = {speedlabs::positive_finite("tf32 / fp32 tokens/s within a step (median)", speedup)};
  // The tiny model's matmuls are too small for tensor cores to matter, so there it is only reported.
  report.decide(
      "tf32_faster_than_fp32", faster_claim, speedup, "tf32 / fp32 tokens/s > 1", evidence,
      [](double s) { return s > 1.0; }, config.model == "gpt2");
  const double gap = max_loss_gap(*tf32, *fp32, config);
  report.check("tf32_differs_slightly_from_fp32", differs_claim, gap, differs_expected,
               gap > 0 && gap <= kTrackTolerance);
}

// first_step_slower_than_median: the very first training step (allocation, the math library's set-up) against
// every timed step after the warm-up, one ratio per timed step, in the first mode trained.
void record_first_step(const ModeResult& r, const Config& config, speedlabs::Report& report) {
  const double first_ms = r.steps.front().ms;
  std::vector<double> ratios;
  for (const auto& s : r.steps) {
    if (s.step >= warmup_steps(config.steps)) ratios.push_back(first_ms / s.ms);
  }
  if (ratios.empty()) {
    report.not_applicable("first_step_slower_than_median", kFirstStepClaim, "first / each timed step > 1, reported",
                          "one step trains no timed step to compare with (--steps 1)", false);
    return;
  }
  // Both are CPU-bound steps of the same training.
  speedlabs::Evidence evidence(speedlabs::summarize_samples(ratios), r.contention, speedlabs::LoadEffect::ratio);
  evidence.bounds = {speedlabs::positive_finite("first / timed step", evidence.value.median)};
  report.decide(
      "first_step_slower_than_median", kFirstStepClaim,
      {{"mode", speedlabs::to_string(r.mode)},
       {"first_ms", first_ms},
       {"median_ms", r.median_ms},
       {"ratio", evidence.value.median}},
      "first / each timed step > 1, reported", evidence, [](double ratio) { return ratio > 1; }, false);
}

void record_observations(const std::vector<ModeResult>& results, const std::map<Precision, std::string>& skipped,
                         const Config& config, const c10::Device& device, speedlabs::Report& report) {
  if (results.empty()) return;
  const ModeResult* fp32 = find(results, Precision::fp32);
  record_losses(results, fp32 ? *fp32 : results.front(), config, report);
  record_precision_effects(results, config, report);
  record_rates(results, skipped, config, report);
  record_first_step(fp32 ? *fp32 : results.front(), config, report);
  record_tf32(results, config, device, report);
  observe_tf32_layout(device, report);
}

// Every size and output is checked before any work: a bad one is a usage error now, not after the training.
void check_before_running(const Config& config, const gpt::GPTConfig& model_config, const c10::Device& device) {
  model_config.require_sequence_fits(config.seq, "--seq " + std::to_string(config.seq));
  if (config.steps < 1 || config.batch < 1 || config.seq < 1 || config.log_every < 1) {
    throw speedlabs::UsageError("steps, batch, seq and log_every must be at least 1");
  }
  if (speedlabs::is_stream_path(config.csv_path)) {
    // Standard output carries the run's log (and --json -): the steps would be mixed into it.
    throw speedlabs::UsageError("--csv needs a file path: standard output ('" + config.csv_path +
                                "') carries the run's log");
  }
  if (!config.csv_path.empty()) speedlabs::require_writable(config.csv_path);
  if (!config.plots_dir.empty()) speedlabs::require_output_folder(config.plots_dir);
  require_memory_fits(config, device);
}

// tokens_loaded and batches_per_epoch: the dataset the chapter trains on, cut into its batches.
std::vector<int32_t> load_tokens(const Config& config, speedlabs::Report& report) {
  auto tokens = datasets::load_shakespeare_tokens(datasets::resolve_data_dir(config.data_dir)).ids;
  const datasets::DataLoaderLite probe(tokens, config.batch, config.seq);
  std::cout << "loaded " << tokens.size() << " tokens\n1 epoch = " << probe.batches_per_epoch() << " batches\n";
  report.check("tokens_loaded", "tiny shakespeare is 338,025 GPT-2 tokens (the chapter's 'loaded 338025 tokens')",
               static_cast<int64_t>(tokens.size()), std::to_string(kShakespeareTokens),
               static_cast<int64_t>(tokens.size()) == kShakespeareTokens);
  const int64_t expected_batches = (kShakespeareTokens - 1) / (config.batch * config.seq);
  report.check(
      "batches_per_epoch", "one epoch is (tokens - 1) // (B*T) batches: 660 at the chapter's B=4, T=128",
      probe.batches_per_epoch(),
      std::to_string(expected_batches) + " at B=" + std::to_string(config.batch) + ", T=" + std::to_string(config.seq),
      probe.batches_per_epoch() == expected_batches);
  return tokens;
}

// The run's setup, then the modes this device can run; the others go into @p skipped with the reason,
// said as they are found.
std::vector<Precision> runnable_modes(const Config& config, const c10::Device& device,
                                      std::map<Precision, std::string>& skipped) {
  std::cout << config.model << " model, B=" << config.batch << ", T=" << config.seq << ", " << config.steps
            << " steps, AdamW lr " << config.lr << ", seed " << config.seed << ", explicit attention (exercise)\n";
  std::vector<Precision> runnable;
  for (Precision mode : config.modes) {
    const std::string reason = why_not_runnable(mode, device);
    if (!reason.empty()) {
      std::cout << "  " << speedlabs::to_string(mode) << ": not run: " << reason << "\n";
      skipped[mode] = reason;
      continue;
    }
    runnable.push_back(mode);
  }
  return runnable;
}

// Trains the runnable modes side by side, step by step, so they share one window of the machine and its reading.
std::vector<ModeResult> train_side_by_side(const Config& config, const c10::Device& device,
                                           const gpt::GPTConfig& model_config, const std::vector<int32_t>& tokens,
                                           const std::vector<Precision>& runnable) {
  speedlabs::ProgressBar bar(config.progress_bar, config.steps);
  speedlabs::install_stop_handlers();  // Ctrl-C or SIGTERM: stop between two steps, with the CSV whole
  speedlabs::CsvLog csv(config.csv_path, "mode,step,loss,ms,tokens_per_s");
  if (runnable.empty()) return {};
  const speedlabs::ContentionProbe probe;
  std::vector<ModeResult> results = train_modes({config, device, model_config, tokens, csv, bar}, runnable);
  const speedlabs::Contention contention = probe.read();
  for (auto& r : results) r.contention = contention;
  return results;
}

// Where the run's files went: the CSV (written step by step) and the plots.
void report_outputs(const std::vector<ModeResult>& results, const Config& config, const c10::Device& device) {
  if (!config.csv_path.empty()) std::cout << "every step written to " << config.csv_path << "\n";
  if (config.plots_dir.empty()) return;
  const std::string title = config.model + ", B=" + std::to_string(config.batch) + ", T=" + std::to_string(config.seq) +
                            ", " + speedlabs::describe(device);
  if (write_plots(results, config.plots_dir, title)) {
    std::cout << "plots written to " << config.plots_dir << "/lab05_loss.svg and lab05_tokens_per_s.svg\n";
  }
}

}  // namespace

std::vector<ModeResult> run(const Config& config, const c10::Device& device, speedlabs::Report& report) {
  const gpt::GPTConfig model_config = gpt::GPTConfig::by_name(config.model);
  check_before_running(config, model_config, device);
  const std::vector<int32_t> tokens = load_tokens(config, report);
  std::map<Precision, std::string> skipped;
  const std::vector<Precision> runnable = runnable_modes(config, device, skipped);
  const std::vector<ModeResult> results = train_side_by_side(config, device, model_config, tokens, runnable);
  if (results.empty()) throw speedlabs::RuntimeFailure("no precision mode can run on " + device.str());
  print_comparison(results, skipped, device, config);
  record_observations(results, skipped, config, device, report);
  record_mfu(results, config, model_config, device, report);
  report_outputs(results, config, device);
  return results;
}

}  // namespace lab05
