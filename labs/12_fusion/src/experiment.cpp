#include "experiment.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <sstream>

#include "chunked_head.h"
#include "common/device.h"
#include "common/errors.h"
#include "common/format.h"
#include "common/gpt.h"
#include "common/host_memory.h"
#include "common/memory.h"
#include "common/plot.h"
#include "common/process.h"
#include "common/table.h"
#include "fused_op.h"
#include "memory_claims.h"

namespace lab12 {

using speedlabs::fixed;
using speedlabs::scientific;

int64_t extra_peak_bytes(const std::function<void()>& call, const c10::Device& device) {
  if (device.is_cpu()) {
    speedlabs::reset_host_memory_peak();
    const int64_t before = speedlabs::host_memory_stats().peak_bytes;  // the live bytes, after the reset
    call();
    return speedlabs::host_memory_stats().peak_bytes - before;
  }
  speedlabs::synchronize(device);
  speedlabs::reset_peak_memory(device);
  const int64_t before = speedlabs::peak_memory_bytes(device).value_or(0);
  call();
  speedlabs::synchronize(device);
  return speedlabs::peak_memory_bytes(device).value_or(0) - before;
}

speedlabs::TimingOptions timing_options(const Config& config) {
  speedlabs::TimingOptions options;
  options.warmup = config.warmup;
  options.repeats = config.repeats;
  options.max_repeats = 3 * config.repeats;
  options.budget_s = 10.0;
  return options;
}

namespace {

// A head's inputs: final hidden states, the (V, C) weight and the next tokens, seeded.
struct HeadInputs {
  torch::Tensor hidden, weight, targets;
};

HeadInputs head_inputs(const speedlabs::gpt::GPTConfig& model, int64_t rows, const Config& config,
                       const c10::Device& device, torch::ScalarType dtype) {
  torch::manual_seed(config.seed + static_cast<uint64_t>(rows));
  const auto options = torch::TensorOptions().device(device);
  // Hidden states of a LayerNorm's scale and a weight of GPT-2's initialisation: logits of a few units.
  return {torch::randn({rows, model.n_embd}, options).to(dtype),
          (torch::randn({model.vocab_size, model.n_embd}, options) * 0.02 * std::sqrt(model.n_embd / 64.0)).to(dtype),
          torch::randint(model.vocab_size, {rows}, options.dtype(torch::kLong))};
}

// One forward and backward of a head; the loss and the two gradients.
using Head = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&)>;

torch::autograd::variable_list forward_backward(const Head& head, const HeadInputs& in) {
  const auto hidden = in.hidden.detach().requires_grad_();
  const auto weight = in.weight.detach().requires_grad_();
  auto loss = head(hidden, weight, in.targets);
  auto grads = torch::autograd::grad({loss}, {hidden, weight});
  return {loss.detach(), grads[0], grads[1]};
}

double relative_max_error(const torch::Tensor& actual, const torch::Tensor& expected) {
  const auto a = actual.to(torch::kDouble), e = expected.to(torch::kDouble);
  return ((a - e).abs().max() / e.abs().max()).item<double>();
}

Head chunked_head(int64_t chunk) {
  return [chunk](const torch::Tensor& h, const torch::Tensor& w, const torch::Tensor& t) {
    return chunked_cross_entropy(h, w, t, chunk);
  };
}

const Head plain_head = [](const torch::Tensor& h, const torch::Tensor& w, const torch::Tensor& t) {
  return plain_cross_entropy(h, w, t);
};

Parity parity(const speedlabs::gpt::GPTConfig& model, int64_t rows, const Config& config, const c10::Device& device,
              torch::ScalarType dtype) {
  const auto in = head_inputs(model, rows, config, device, dtype);
  const auto plain = forward_backward(plain_head, in);
  const auto chunked = forward_backward(chunked_head(config.chunk), in);
  Parity p;
  p.dtype = dtype == torch::kFloat ? "float32" : "bfloat16";
  p.plain_loss = plain[0].item<double>();
  p.chunked_loss = chunked[0].item<double>();
  p.hidden_grad_error = relative_max_error(chunked[1], plain[1]);
  p.weight_grad_error = relative_max_error(chunked[2], plain[2]);
  return p;
}

// A few float32 AdamW steps of GPT-2 on seeded random tokens, with the plain head (GPT::forward's loss) or the
// chunked one on the same final hidden states and the same tied weight. The losses per step, and the largest
// extra peak of a step after the first (whose AdamW state is made then).
std::pair<std::vector<double>, int64_t> train_gpt(bool chunked, const Config& config, const c10::Device& device) {
  torch::manual_seed(config.seed);
  speedlabs::gpt::GPT model(speedlabs::gpt::GPTConfig::by_name(config.model));
  model->to(device);
  auto optimizer = speedlabs::gpt::make_adamw(model, 1e-3);
  const int64_t vocab = model->config().vocab_size;
  std::vector<double> losses;
  int64_t peak = 0;
  for (int step = 0; step < config.gpt_steps; ++step) {
    torch::manual_seed(config.seed + 1000 + static_cast<uint64_t>(step));
    const auto x = torch::randint(vocab, {config.batch, config.seq}, torch::TensorOptions(device).dtype(torch::kLong));
    const auto y = torch::randint(vocab, {config.batch, config.seq}, x.options());
    torch::Tensor loss;
    const int64_t bytes = extra_peak_bytes(
        [&] {
          loss = chunked ? chunked_cross_entropy(model->hidden(x), model->wte->weight, y, config.chunk)
                         : model->forward(x, y).loss;
          loss.backward();
          optimizer.step();
          optimizer.zero_grad();
        },
        device);
    losses.push_back(loss.item<double>());
    if (step > 0) peak = std::max(peak, bytes);
  }
  return {losses, peak};
}

std::string mib(int64_t bytes) { return fixed(speedlabs::to_mib(static_cast<double>(bytes)), 1); }

void print_tables(const Results& r, const Config& config) {
  std::cout << "\n  loss and gradients, plain vs chunked (chunks of " << config.chunk << " rows)\n";
  const speedlabs::NumberFormat loss = speedlabs::fixed_digits(6), error = speedlabs::scientific_digits(2);
  speedlabs::Table parity;
  parity.left("dtype", 9).right("plain loss", 12, loss).right("chunked loss", 15, loss);
  parity.right("d hidden error", 17, error).right("d weight error", 17, error);
  for (const auto& p : r.parity) {
    parity.add_row({p.dtype, p.plain_loss, p.chunked_loss, p.hidden_grad_error, p.weight_grad_error});
  }
  parity.print(std::cout);
  std::cout << "\n  extra peak of one forward + backward of the head (MiB)\n";
  speedlabs::Table peaks("");
  peaks.right("B x T", 8, speedlabs::fixed_digits(0)).right("logits (B x T x V)", 21).right("plain", 10);
  peaks.right("chunked", 10);
  for (const auto& peak : r.peaks) {
    peaks.add_row({double(peak.rows), mib(peak.logits_bytes), mib(peak.plain_bytes), mib(peak.chunked_bytes)});
  }
  peaks.print(std::cout);
  std::cout << "\n  GPT-2 (" << config.model << ") training, loss per step: plain head";
  for (double loss : r.plain_gpt_losses) std::cout << " " << fixed(loss, 5);
  std::cout << "; chunked head";
  for (double loss : r.chunked_gpt_losses) std::cout << " " << fixed(loss, 5);
  std::cout << "\n  steady step's extra peak: plain " << mib(r.plain_gpt_peak) << " MiB, chunked "
            << mib(r.chunked_gpt_peak) << " MiB\n\n";
}

// The chunked head computes the plain one's loss and gradients, within each dtype's rounding.
void observe_parity(const Config& config, const Results& r, const speedlabs::gpt::GPTConfig& model,
                    speedlabs::Report& report) {
  const std::string where = "B x T = " + std::to_string(r.peaks.front().rows) +
                            ", C = " + std::to_string(model.n_embd) + ", V = " + std::to_string(model.vocab_size) +
                            ", chunks of " + std::to_string(config.chunk);
  nlohmann::json losses = nlohmann::json::object(), grads = nlohmann::json::object();
  bool losses_hold = true, grads_hold = true;
  for (const auto& p : r.parity) {
    const bool f32 = p.dtype == "float32";
    const double loss_error = std::abs(p.chunked_loss - p.plain_loss) / std::abs(p.plain_loss);
    losses[p.dtype] = {{"plain", p.plain_loss}, {"chunked", p.chunked_loss}, {"relative_error", loss_error}};
    grads[p.dtype] = {{"hidden", p.hidden_grad_error}, {"weight", p.weight_grad_error}};
    losses_hold = losses_hold && loss_error <= (f32 ? kLossRtolFloat : kLossRtolBf16);
    const double grad_limit = f32 ? kGradRtolFloat : kGradRtolBf16;
    grads_hold = grads_hold && p.hidden_grad_error <= grad_limit && p.weight_grad_error <= grad_limit;
  }
  report.check("chunked_loss_vs_plain", "the chunked head's loss equals libtorch's linear + cross_entropy at " + where,
               losses,
               "relative error <= " + scientific(kLossRtolFloat, 0) +
                   " in float32, <= " + scientific(kLossRtolBf16, 0) + " in bfloat16",
               losses_hold);
  report.check("chunked_grads_match",
               "the chunked backward's gradients of the hidden states and of the weight equal autograd's through "
               "libtorch's linear + cross_entropy at " +
                   where,
               grads,
               "max |difference| / max |plain| <= " + scientific(kGradRtolFloat, 0) +
                   " in float32, <= " + scientific(kGradRtolBf16, 0) + " in bfloat16",
               grads_hold);
}

void observe_head_time(const Results& r, speedlabs::Report& report) {
  const auto& largest = r.peaks.back();
  const double plain_ms = r.head_timing.sides[0].median_ms, chunked_ms = r.head_timing.sides[1].median_ms;
  speedlabs::Evidence evidence = speedlabs::ratio_evidence(r.head_timing, 1, 0);
  const speedlabs::Summary& ratio = evidence.value;
  // Times and their ratio: positive and finite, or the measurement failed. (No tighter bound is physical: tiny
  // chunks may make the chunked head many times slower, and the plain head's passes over B x T x V may make it
  // slower than the chunked one.)
  constexpr double kTiny = std::numeric_limits<double>::min(), kHuge = std::numeric_limits<double>::max();
  evidence.bounds = {{"chunked / plain time within a round (median)", ratio.median, kTiny, kHuge},
                     {"plain median ms", plain_ms, kTiny, kHuge},
                     {"chunked median ms", chunked_ms, kTiny, kHuge}};
  report.decide(
      "time_vs_plain",
      "time of one forward + backward of the chunked head over the plain one at B x T = " +
          std::to_string(largest.rows) + ", interleaved",
      {{"rows", largest.rows},
       {"plain_ms", plain_ms},
       {"chunked_ms", chunked_ms},
       {"ratio", ratio.median},
       {"ratio_q1", ratio.q1},
       {"ratio_q3", ratio.q3},
       {"rounds", ratio.count}},
      "reported; the goal is at most " + fixed(kTimeGoal, 1) + "x", evidence, [](double x) { return x <= kTimeGoal; },
      /*must_hold=*/false);
}

// Gnuplot's datablock: B x T, then the plain and the chunked extra peak in MiB.
std::string plot_data(const Results& results) {
  std::ostringstream data;
  data << "$data << EOD\n";
  for (const auto& p : results.peaks) {
    data << p.rows << " " << speedlabs::to_mib(static_cast<double>(p.plain_bytes)) << " "
         << speedlabs::to_mib(static_cast<double>(p.chunked_bytes)) << "\n";
  }
  data << "EOD\n";
  return data.str();
}

// The model whose head the lab measures; T must fit its block, and the plain head's logits, their log-softmax and
// their gradient at B x T this device's memory (a batch beyond it, or one whose byte count would overflow, is the
// user's input to fix, not a failed allocation).
speedlabs::gpt::GPTConfig checked_model(const Config& config, const c10::Device& device) {
  const auto model = speedlabs::gpt::GPTConfig::by_name(config.model);
  model.require_sequence_fits(config.seq, "--seq " + std::to_string(config.seq));
  const double plain_bytes = 3.0 * 4.0 * static_cast<double>(config.batch) * static_cast<double>(config.seq) *
                             static_cast<double>(model.vocab_size);
  const auto total = speedlabs::total_memory_bytes(device);
  const double limit = static_cast<double>(total.value_or(std::numeric_limits<int64_t>::max()));
  if (plain_bytes > limit) {
    throw speedlabs::UsageError("--batch " + std::to_string(config.batch) + " at T = " + std::to_string(config.seq) +
                                " is too large: the plain head's three B x T x V float32 tensors take " +
                                fixed(speedlabs::to_mib(plain_bytes), 0) + " MiB, more than " +
                                fixed(speedlabs::to_mib(limit), 0) + " MiB of memory here");
  }
  return model;
}

// A chunk holds at most every row: one beyond the largest B x T is a mistake in the flags, and refused before any
// work (like a value too large to count).
void check_chunk(const Config& config) {
  const int64_t rows = config.batch * config.seq;  // checked_model() has bounded both
  if (config.chunk > rows) {
    throw speedlabs::UsageError("--chunk " + std::to_string(config.chunk) + " is more than the " +
                                std::to_string(rows) + " rows of B x T: give at most " + std::to_string(rows));
  }
}

// The memory sweep's B: a quarter, a half and all of --batch (each once).
std::vector<int64_t> sweep_batches(const Config& config) {
  std::vector<int64_t> batches{std::max<int64_t>(1, config.batch / 4), std::max<int64_t>(1, config.batch / 2),
                               config.batch};
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  return batches;
}

void print_intro(const Config& config, const speedlabs::gpt::GPTConfig& model, const c10::Device& device,
                 const std::vector<int64_t>& batches) {
  std::cout << "the LM head of " << config.model << " (C = " << model.n_embd << ", V = " << model.vocab_size
            << ") with its cross-entropy, plain and in chunks of " << config.chunk << " rows, on "
            << speedlabs::describe(device) << "; B x T = ";
  for (const int64_t b : batches) std::cout << b * config.seq << " ";
  std::cout << "\n";
}

// Extra peak of one forward and backward of each head, at every B x T of the sweep.
std::vector<HeadPeak> measure_peaks(const Config& config, const speedlabs::gpt::GPTConfig& model,
                                    const c10::Device& device, const std::vector<int64_t>& batches) {
  std::vector<HeadPeak> peaks;
  for (const int64_t b : batches) {
    speedlabs::stop_if_asked("during the memory measurements");
    HeadPeak peak;
    peak.rows = b * config.seq;
    peak.logits_bytes = peak.rows * model.vocab_size * 4;
    const auto in = head_inputs(model, peak.rows, config, device, torch::kFloat);
    peak.plain_bytes = extra_peak_bytes([&] { forward_backward(plain_head, in); }, device);
    peak.chunked_bytes = extra_peak_bytes([&] { forward_backward(chunked_head(config.chunk), in); }, device);
    peaks.push_back(peak);
  }
  return peaks;
}

// One forward and backward of the plain head against the chunked one, interleaved, at @p rows = B x T.
speedlabs::Interleaved time_heads(const Config& config, const speedlabs::gpt::GPTConfig& model,
                                  const c10::Device& device, int64_t rows) {
  const auto in = head_inputs(model, rows, config, device, torch::kFloat);
  const Head chunked = chunked_head(config.chunk);
  return speedlabs::time_interleaved({[&] {
                                        speedlabs::stop_if_asked("during the timing");
                                        forward_backward(plain_head, in);
                                      },
                                      [&] {
                                        speedlabs::stop_if_asked("during the timing");
                                        forward_backward(chunked, in);
                                      }},
                                     device, timing_options(config));
}

}  // namespace

bool write_plot(const Results& results, const Config& config, const std::string& directory) {
  const std::string title = "LM head + cross-entropy, forward + backward, " + config.model +
                            " (V = 50257), chunks of " + std::to_string(config.chunk);
  // The script comes on stdin; the output path and the title travel as ARG1 and ARG2, data, never script text.
  const std::string script = plot_data(results) + R"gnuplot(
set terminal svg size 720,420 dynamic font "sans,12" background "white"
set output ARG1
set title ARG2
set logscale xy 2
set xlabel "B x T (tokens)"
set ylabel "extra peak memory (MiB)"
set key top left
set grid
plot $data using 1:2 with linespoints lw 2 title "plain (logits written out)", \
     $data using 1:3 with linespoints lw 2 title "chunked"
)gnuplot";
  std::string failure;
  const auto written = speedlabs::write_svgs(script, directory, {"lab12_peak_memory"}, {title}, failure);
  if (written.empty()) {
    std::cerr << "lab12: no plot: " << failure << "\n";
    return false;
  }
  std::cout << "plot written to " << written.front() << "\n";
  return true;
}

Results run(const Config& config, const c10::Device& device, speedlabs::Report& report) {
  if (!device.is_cpu() && !device.is_cuda()) throw speedlabs::UsageError("lab12: runs on the CPU or a CUDA GPU");
  speedlabs::install_stop_handlers();
  speedlabs::install_host_memory_counter();  // before any tensor: only counted storage can be measured
  const auto model = checked_model(config, device);
  check_chunk(config);
  const std::vector<int64_t> batches = sweep_batches(config);
  print_intro(config, model, device, batches);

  // The chunked head: the same loss and gradients, a fraction of the memory, its time, inside GPT-2's training.
  Results r;
  const int64_t smallest = batches.front() * config.seq;
  for (const auto dtype : {torch::kFloat, torch::kBFloat16})
    r.parity.push_back(parity(model, smallest, config, device, dtype));
  r.peaks = measure_peaks(config, model, device, batches);
  r.head_timing = time_heads(config, model, device, r.peaks.back().rows);
  std::tie(r.plain_gpt_losses, r.plain_gpt_peak) = train_gpt(false, config, device);
  std::tie(r.chunked_gpt_losses, r.chunked_gpt_peak) = train_gpt(true, config, device);
  print_tables(r, config);
  observe_parity(config, r, model, report);
  observe_peak_memory(config, r, model, report);
  observe_head_time(r, report);
  observe_gpt_step(config, r, model, report);

  run_fused_op(config, device, r, report);
  if (!config.plots_dir.empty()) write_plot(r, config, config.plots_dir);
  return r;
}

}  // namespace lab12
