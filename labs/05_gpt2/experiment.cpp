#include "experiment.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "common/autocast_guard.h"
#include "common/curves.h"
#include "common/device.h"
#include "common/errors.h"
#include "common/format.h"
#include "common/gpt.h"
#include "common/memory.h"
#include "common/process.h"
#include "common/progress.h"
#include "common/timer.h"
#include "datasets/data_files.h"
#include "datasets/data_loader.h"
#include "exercise.h"

namespace lab05 {

using speedlabs::Precision;
using speedlabs::fixed;
namespace gpt = speedlabs::gpt;

Config quick_config() {
  Config config;
  config.model = "tiny";
  config.seq = 32;  // the logits (B*T x 50257) dominate the tiny model's cost
  config.steps = 15;
  config.modes = speedlabs::all_precisions();
  return config;
}

int warmup_steps(int steps) { return std::max(1, steps / 10); }

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
constexpr double kInitialLossTolerance = 0.3;
// Training must lower the loss by at least this much (mean of the last 10% of steps vs step 0).
constexpr double kMinLossDrop = 0.5;

// Ctrl-C: the handler only sets a flag; the loop stops between steps, so the CSV keeps whole lines.
volatile std::sig_atomic_t interrupted = 0;
extern "C" void on_sigint(int) { interrupted = 1; }

class SigintHandler {
 public:
  SigintHandler() {
    interrupted = 0;
    struct sigaction action {};
    action.sa_handler = on_sigint;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous_);
  }
  ~SigintHandler() { sigaction(SIGINT, &previous_, nullptr); }
  SigintHandler(const SigintHandler&) = delete;
  SigintHandler& operator=(const SigintHandler&) = delete;

 private:
  struct sigaction previous_ {};
};

std::string megabytes(std::optional<int64_t> bytes) {
  return bytes ? fixed(static_cast<double>(*bytes) / (1 << 20), 1) + " MiB" : "n/a";
}

// An fp16 step whose loss overflows is skipped while the scaler lowers its scale; the loss itself comes
// from the forward pass, which the scale does not touch, so this many overflowed losses in a row mean a
// run that cannot recover: it stops as one that could not be made (exit 3), not as a verdict.
constexpr int kMaxNonfiniteInARow = 8;

bool logged(int step, const Config& config) { return step % config.log_every == 0 || step == config.steps - 1; }

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
  return device.is_cuda() ? "" : "TF32 is a math mode of NVIDIA tensor cores; on " + device.str() +
                                     " the 'high' float32 matmul precision changes nothing";
}

struct Run {
  const Config& config;
  const c10::Device& device;
  const gpt::GPTConfig model_config;
  const std::vector<int32_t>& tokens;
  std::ofstream* csv;
  speedlabs::ProgressBar& bar;
};

ModeResult train_one_mode(const Run& run, Precision mode) {
  const Config& config = run.config;
  ModeResult result;
  result.mode = mode;
  speedlabs::reset_peak_memory(run.device);
  // The same seed before each model: every mode starts from the same weights and sees the same batches.
  torch::manual_seed(config.seed);
  gpt::GPT model(run.model_config, causal_attention);
  model->to(run.device);
  datasets::DataLoaderLite loader(run.tokens, config.batch, config.seq);
  auto optimizer = gpt::make_adamw(model, config.lr);
  lab03::GradScaler scaler;  // your lab 03 scaler; train_step uses it in fp16 only

  const std::string name = speedlabs::to_string(mode);
  const double tokens_per_step = static_cast<double>(config.batch * config.seq);
  int nonfinite_in_a_row = 0;
  for (int step = 0; step < config.steps; ++step) {
    if (interrupted) {
      run.bar.clear();
      throw speedlabs::RuntimeFailure(
          "interrupted (Ctrl-C) at step " + std::to_string(step) + " of mode " + name +
          (config.csv_path.empty() ? "" : "; the steps done so far are in " + config.csv_path));
    }
    torch::Tensor loss;
    const double ms = speedlabs::time_once_ms(
        [&] {
          const auto batch = loader.next_batch();
          loss = train_step(model, optimizer, scaler, batch.x.to(run.device), batch.y.to(run.device), mode);
        },
        run.device);
    const double value = loss.item<double>();
    const StepRecord record{step, value, ms, tokens_per_step / (ms / 1000.0)};
    result.steps.push_back(record);
    if (run.csv) {
      *run.csv << name << ',' << step << ',' << std::setprecision(9) << value << ',' << fixed(ms, 3) << ','
               << fixed(record.tokens_per_s, 1) << '\n'
               << std::flush;  // a killed or interrupted run keeps every finished step
    }
    if (!std::isfinite(value)) {
      if (mode != Precision::fp16) {
        run.bar.clear();
        throw speedlabs::RuntimeFailure("the loss is " + std::string(std::isnan(value) ? "NaN" : "inf") +
                                        " at step " + std::to_string(step) + " in " + name +
                                        ": training diverged; try a smaller --lr");
      }
      ++result.nonfinite_fp16_steps;  // float16 overflow: the scaler skips this step and lowers the scale
      if (++nonfinite_in_a_row == kMaxNonfiniteInARow) {
        run.bar.clear();
        throw speedlabs::RuntimeFailure(
            "the fp16 loss is NaN or inf at " + std::to_string(kMaxNonfiniteInARow) + " steps in a row (to step " +
            std::to_string(step) + "): the forward pass overflows float16, which loss scaling cannot fix; "
            "try a smaller --lr, or bf16");
      }
    } else {
      nonfinite_in_a_row = 0;
    }
    if (logged(step, config)) {
      run.bar.clear();
      std::cout << "  " << std::left << std::setw(5) << name << std::right << "step " << std::setw(4) << step
                << " | loss " << fixed(value, 6) << " | " << std::setw(9) << fixed(ms, 2) << " ms/step | "
                << std::setw(9) << fixed(record.tokens_per_s, 0) << " tokens/s" << std::endl;
    }
    run.bar.show(name, step + 1);
  }
  run.bar.clear();

  std::vector<double> timed;
  for (const auto& s : result.steps) {
    if (s.step >= warmup_steps(config.steps)) timed.push_back(s.ms);
  }
  if (timed.empty()) timed.push_back(result.steps.back().ms);  // a one-step run has only its warm-up step
  result.median_ms = speedlabs::summarize(timed).median_ms;
  result.tokens_per_s = tokens_per_step / (result.median_ms / 1000.0);
  result.peak_bytes = speedlabs::peak_memory_bytes(run.device);
  result.final_loss_scale = mode == Precision::fp16 ? scaler.get_scale() : 1.0;
  std::set<std::string> dtypes;
  for (const auto& p : model->parameters()) dtypes.insert(c10::toString(p.scalar_type()));
  result.weight_dtypes.assign(dtypes.begin(), dtypes.end());
  return result;
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

double mean_of_last_steps(const ModeResult& r) {
  const size_t n = std::min(r.steps.size(), static_cast<size_t>(warmup_steps(static_cast<int>(r.steps.size()))));
  double sum = 0;
  for (size_t i = r.steps.size() - n; i < r.steps.size(); ++i) sum += r.steps[i].loss;
  return sum / static_cast<double>(n);
}

void print_comparison(const std::vector<ModeResult>& results, const std::map<Precision, std::string>& skipped,
                      const c10::Device& device, const Config& config) {
  const ModeResult* fp32 = find(results, Precision::fp32);
  std::cout << "\n  " << std::left << std::setw(6) << "mode" << std::right << std::setw(12) << "tokens/s"
            << std::setw(10) << "speed-up" << std::setw(14) << "max|dloss|" << std::setw(13) << "peak mem"
            << "  note\n";
  for (const auto& r : results) {
    std::string note;
    if (r.mode == Precision::tf32) note = tf32_note(device);
    if (r.mode == Precision::fp16) {
      note = "loss scaled (final scale " + fixed(r.final_loss_scale, 0) + "), " +
             std::to_string(r.nonfinite_fp16_steps) + " overflowed steps skipped";
    }
    std::cout << "  " << std::left << std::setw(6) << speedlabs::to_string(r.mode) << std::right << std::setw(12)
              << fixed(r.tokens_per_s, 0) << std::setw(10)
              << (fp32 ? fixed(r.tokens_per_s / fp32->tokens_per_s, 2) + "x" : "n/a") << std::setw(14)
              << (fp32 ? fixed(max_loss_gap(r, *fp32, config), 4) : "n/a") << std::setw(13) << megabytes(r.peak_bytes)
              << "  " << note << "\n";
  }
  for (const auto& [mode, reason] : skipped) {
    std::cout << "  " << std::left << std::setw(6) << speedlabs::to_string(mode) << std::right << std::setw(49)
              << "not run" << "  " << reason << "\n";
  }
  std::cout << "  (tokens/s from the median step after " << warmup_steps(config.steps)
            << " warm-up step(s); max|dloss| over the logged steps" << (device.is_cpu() ? "; the CPU allocator keeps no peak-memory statistics" : "") << ")\n";
}

void record_observations(const std::vector<ModeResult>& results, const std::map<Precision, std::string>& skipped,
                         const Config& config, const c10::Device& device, speedlabs::Report& report) {
  if (results.empty()) return;
  const ModeResult& first = results.front();
  const ModeResult* fp32 = find(results, Precision::fp32);
  const ModeResult& baseline = fp32 ? *fp32 : first;
  const double ln_vocab = std::log(static_cast<double>(gpt::GPTConfig::by_name(config.model).vocab_size));

  const double initial = baseline.steps.front().loss;
  report.check("initial_loss_near_ln_vocab",
               "before training the model guesses almost uniformly over the 50,257 tokens, so the step-0 loss "
               "(" + speedlabs::to_string(baseline.mode) + ") is close to ln(50257)",
               initial, "|loss - " + fixed(ln_vocab, 3) + "| <= " + fixed(kInitialLossTolerance, 1),
               std::abs(initial - ln_vocab) <= kInitialLossTolerance);

  nlohmann::json drops;
  bool all_drop = true;
  for (const auto& r : results) {
    const double drop = r.steps.front().loss - mean_of_last_steps(r);
    drops[speedlabs::to_string(r.mode)] = {{"step0", r.steps.front().loss}, {"last_mean", mean_of_last_steps(r)}};
    all_drop = all_drop && drop >= kMinLossDrop;  // a NaN drop compares false
  }
  report.check("loss_decreases", "training lowers the loss in every mode (mean of the last 10% of steps vs step 0)",
               drops, "drop >= " + fixed(kMinLossDrop, 1) + " nat in every mode", all_drop);

  if (fp32 && results.size() > 1) {
    nlohmann::json gaps;
    bool all_track = true;
    for (const auto& r : results) {
      if (r.mode == Precision::fp32) continue;
      const double gap = max_loss_gap(r, *fp32, config);
      gaps[speedlabs::to_string(r.mode)] = std::isfinite(gap) ? nlohmann::json(gap) : nlohmann::json("non-finite");
      all_track = all_track && gap <= kTrackTolerance;
    }
    report.check("modes_track_fp32",
                 "the lower-precision modes follow fp32's loss curve: same weights, same batches, only rounding "
                 "differs (tolerance: the drift of 100 steps of slightly different updates; the chapter's A100 "
                 "logs stay within 0.09)",
                 gaps, "max |loss - fp32 loss| over the logged steps <= " + fixed(kTrackTolerance, 2), all_track);
  } else {
    report.not_applicable("modes_track_fp32", "the lower-precision modes follow fp32's loss curve",
                          "max |loss - fp32 loss| <= " + fixed(kTrackTolerance, 2),
                          "needs fp32 and another mode: run with --precision all");
  }

  nlohmann::json dtypes;
  bool all_float = true;
  for (const auto& r : results) {
    dtypes[speedlabs::to_string(r.mode)] = r.weight_dtypes;
    all_float = all_float && r.weight_dtypes == std::vector<std::string>{"Float"};
  }
  report.check("weights_stay_fp32",
               "autocast changes the dtype of the step's arithmetic, not of the weights: every parameter is "
               "still float32 after training in every mode",
               dtypes, "only Float", all_float);

  for (const auto& r : results) {
    report.check("tokens_per_s_" + speedlabs::to_string(r.mode),
                 "training throughput in " + speedlabs::to_string(r.mode) + " (B*T / median step time)",
                 r.tokens_per_s, "> 0, reported", std::isfinite(r.tokens_per_s) && r.tokens_per_s > 0, false);
  }
  for (const auto& [mode, reason] : skipped) {
    report.not_applicable("tokens_per_s_" + speedlabs::to_string(mode),
                          "training throughput in " + speedlabs::to_string(mode), "> 0, reported", reason, false);
  }

  const ModeResult* tf32 = find(results, Precision::tf32);
  const std::string faster_claim = "TF32 tensor cores make the float32 matmuls faster (the chapter: ~1.5x on an A100)";
  const std::string differs_claim =
      "TF32 rounds matmul inputs to 10 mantissa bits, so its losses differ from fp32's, but only slightly";
  const std::string differs_expected = "0 < max |loss - fp32 loss| <= " + fixed(kTrackTolerance, 2);
  if (!device.is_cuda()) {
    const std::string gap = (fp32 && tf32) ? " (measured max |dloss| = " + fixed(max_loss_gap(*tf32, *fp32, config), 6) + ")" : "";
    report.not_applicable("tf32_faster_than_fp32", faster_claim, "tf32 tokens/s > fp32 tokens/s", tf32_note(device));
    report.not_applicable("tf32_differs_slightly_from_fp32", differs_claim, differs_expected, tf32_note(device) + gap);
  } else if (!fp32 || !tf32) {
    const std::string reason = "needs fp32 and tf32: run with --precision all";
    report.not_applicable("tf32_faster_than_fp32", faster_claim, "tf32 tokens/s > fp32 tokens/s", reason);
    report.not_applicable("tf32_differs_slightly_from_fp32", differs_claim, differs_expected, reason);
  } else {
    const double speedup = tf32->tokens_per_s / fp32->tokens_per_s;
    // The tiny model's matmuls are too small for tensor cores to matter, so there it is only reported.
    report.check("tf32_faster_than_fp32", faster_claim, speedup, "tf32 / fp32 tokens/s > 1", speedup > 1.0,
                 config.model == "gpt2");
    const double gap = max_loss_gap(*tf32, *fp32, config);
    report.check("tf32_differs_slightly_from_fp32", differs_claim, gap, differs_expected,
                 gap > 0 && gap <= kTrackTolerance);
  }
}

}  // namespace

std::vector<ModeResult> run(const Config& config, const c10::Device& device, speedlabs::Report& report) {
  const gpt::GPTConfig model_config = gpt::GPTConfig::by_name(config.model);
  if (config.seq > model_config.block_size) {
    throw speedlabs::UsageError("--seq " + std::to_string(config.seq) + " is longer than the " + config.model +
                                " model's block size " + std::to_string(model_config.block_size));
  }
  if (config.steps < 1 || config.batch < 1 || config.seq < 1 || config.log_every < 1) {
    throw speedlabs::UsageError("steps, batch, seq and log_every must be at least 1");
  }
  std::ofstream csv;
  if (!config.csv_path.empty()) {
    csv.open(config.csv_path, std::ios::trunc);
    if (!csv) throw speedlabs::UsageError("cannot write the --csv file '" + config.csv_path + "'");
    csv << "mode,step,loss,ms,tokens_per_s\n" << std::flush;
  }

  const auto tokens = datasets::load_shakespeare_tokens(datasets::resolve_data_dir(config.data_dir)).ids;
  const datasets::DataLoaderLite probe(tokens, config.batch, config.seq);
  std::cout << "loaded " << tokens.size() << " tokens\n1 epoch = " << probe.batches_per_epoch() << " batches\n";
  report.check("tokens_loaded", "tiny shakespeare is 338,025 GPT-2 tokens (the chapter's 'loaded 338025 tokens')",
               static_cast<int64_t>(tokens.size()), std::to_string(kShakespeareTokens),
               static_cast<int64_t>(tokens.size()) == kShakespeareTokens);
  const int64_t expected_batches = (kShakespeareTokens - 1) / (config.batch * config.seq);
  report.check("batches_per_epoch",
               "one epoch is (tokens - 1) // (B*T) batches: 660 at the chapter's B=4, T=128",
               probe.batches_per_epoch(), std::to_string(expected_batches) + " at B=" + std::to_string(config.batch) +
               ", T=" + std::to_string(config.seq), probe.batches_per_epoch() == expected_batches);

  std::cout << config.model << " model, B=" << config.batch << ", T=" << config.seq << ", " << config.steps
            << " steps, AdamW lr " << config.lr << ", seed " << config.seed << ", explicit attention (exercise)\n";
  speedlabs::ProgressBar bar(config.progress_bar, config.steps);
  SigintHandler sigint;
  const Run run{config, device, model_config, tokens, csv.is_open() ? &csv : nullptr, bar};
  std::vector<ModeResult> results;
  std::map<Precision, std::string> skipped;
  for (Precision mode : config.modes) {
    const std::string reason = why_not_runnable(mode, device);
    if (!reason.empty()) {
      std::cout << "  " << speedlabs::to_string(mode) << ": not run: " << reason << "\n";
      skipped[mode] = reason;
      continue;
    }
    results.push_back(train_one_mode(run, mode));
  }
  if (results.empty()) throw speedlabs::RuntimeFailure("no precision mode can run on " + device.str());

  print_comparison(results, skipped, device, config);
  record_observations(results, skipped, config, device, report);
  if (!config.csv_path.empty()) std::cout << "every step written to " << config.csv_path << "\n";
  if (!config.plots_dir.empty()) {
    const std::string title = config.model + ", B=" + std::to_string(config.batch) + ", T=" +
                              std::to_string(config.seq) + ", " + speedlabs::describe(device);
    if (write_plots(results, config.plots_dir, title)) {
      std::cout << "plots written to " << config.plots_dir << "/lab05_loss.svg and lab05_tokens_per_s.svg\n";
    }
  }
  return results;
}

bool write_plots(const std::vector<ModeResult>& results, const std::string& directory, const std::string& title) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) {
    std::cerr << "lab05: no plots: cannot create '" << directory << "': " << error.message() << "\n";
    return false;
  }
  // The data travels inline as gnuplot "datablocks", so no temporary files are left behind.
  std::ostringstream script;
  script << "set terminal svg size 900,520 dynamic background rgb 'white'\n";
  for (const auto& r : results) {
    script << "$" << speedlabs::to_string(r.mode) << " << EOD\n";
    for (const auto& s : r.steps) script << s.step << ' ' << std::setprecision(9) << s.loss << '\n';
    script << "EOD\n";
  }
  script << "$speed << EOD\n";
  for (const auto& r : results) script << speedlabs::to_string(r.mode) << ' ' << r.tokens_per_s << '\n';
  script << "EOD\n";
  // A file name inside a gnuplot single-quoted string: a quote in it is written twice, so the name stays
  // data (a folder named "it's" once broke the script) and can never end the string early.
  const auto path = [&](const std::string& file) {
    std::string quoted;
    for (const char c : (std::filesystem::path(directory) / file).string()) quoted += c == '\'' ? "''" : std::string(1, c);
    return quoted;
  };
  script << "set output '" << path("lab05_loss.svg") << "'\n"
         << "set title 'Training loss per step: " << title << "'\nset xlabel 'step'\nset ylabel 'loss (nat)'\n"
         << "set grid\nset key top right\nplot ";
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string name = speedlabs::to_string(results[i].mode);
    script << (i ? ", " : "") << "$" << name << " using 1:2 with lines lw 2 dt " << i + 1 << " title '" << name << "'";
  }
  script << "\nunset output\nset output '" << path("lab05_tokens_per_s.svg") << "'\n"
         << "set title 'Throughput (median step): " << title << "'\nset xlabel 'precision'\n"
         << "set ylabel 'tokens/s'\nset key off\nset style fill solid 0.7\nset boxwidth 0.6\nset yrange [0:*]\n"
         << "plot $speed using 0:2:xtic(1) with boxes, '' using 0:2:(sprintf('%.0f', $2)) with labels offset 0,1\n"
         << "unset output\n";

  speedlabs::ProcessOptions options;
  options.input = script.str();  // the script on gnuplot's stdin: an argv vector, no shell
  options.timeout_s = 60;
  speedlabs::ProcessResult gnuplot;
  try {
    gnuplot = speedlabs::run_process({"gnuplot"}, options);
  } catch (const speedlabs::RuntimeFailure& e) {
    std::cerr << "lab05: no plots: " << e.what() << "; install gnuplot (Debian: gnuplot-nox) to get them\n";
    return false;
  }
  if (!gnuplot.ok()) {
    std::cerr << "lab05: no plots: gnuplot failed (" << gnuplot.describe() << "): " << gnuplot.output << "\n";
    return false;
  }
  return true;
}

}  // namespace lab05
