#include "experiment.h"

#include <iomanip>
#include <iostream>
#include <limits>
#include <map>

#include "common/device.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/format.h"
#include "common/host_memory.h"
#include "common/memory.h"
#include "common/process.h"
#include "common/roofline.h"
#include "common/sequential.h"
#include "common/timer.h"
#include "datasets/data_files.h"
#include "datasets/token_cache.h"
#include "ladder_report.h"
#include "python_peers.h"
#include "rung_runner.h"

namespace lab06 {

namespace gpt = speedlabs::gpt;
using nlohmann::json;
using speedlabs::fixed;

void adapt_to_cpu(Config& config) {
  config.shapes = {{4, 128}};
  config.matmul_size = 1024;
  config.compile_modes.clear();
}

double flops_per_token(int64_t n_params_without_wpe, int64_t n_layer, int64_t n_head, int64_t head_size, int64_t seq) {
  return speedlabs::model_flops_per_token(static_cast<double>(n_params_without_wpe), n_layer, n_head * head_size, seq);
}

namespace {

// Every matmul peak of the ladder: 3 warm-up calls, then 10 to 30 repeats within a second.
speedlabs::TimingOptions peak_timing() {
  speedlabs::TimingOptions timing;
  timing.warmup = 3;
  timing.repeats = 10;
  timing.max_repeats = 30;
  timing.budget_s = 1.0;
  return timing;
}

}  // namespace

MatmulPeak measure_bf16_matmul(const c10::Device& device, int64_t n) {
  const auto rate = speedlabs::measure_matmul_rate(device, speedlabs::PeakFormat::bf16, n, peak_timing());
  MatmulPeak peak;
  peak.time = rate.time;
  peak.flops = rate.flops_per_call;
  // A peak is a maximum: the best repeat. The median one, beside it, says how typical that was.
  peak.tflops = rate.flops / 1e12;
  peak.median_tflops = rate.median_flops / 1e12;
  return peak;
}

double measure_bf16_matmul_tflops(const c10::Device& device, int64_t n) {
  return measure_bf16_matmul(device, n).tflops;
}

std::string sdpa_backend(const c10::Device& device, const Shape& shape, int64_t n_head, int64_t head_size,
                         c10::ScalarType dtype) {
  const auto q =
      torch::zeros({shape.batch, n_head, shape.seq, head_size}, torch::TensorOptions().device(device).dtype(dtype));
  // The numbers of sdp::SDPBackend (ATen/native/transformers/sdp_utils_cpp.h).
  switch (at::_fused_sdp_choice(q, q, q, {}, 0.0, /*is_causal=*/true)) {
    case 0:
      return "math";
    case 1:
      return device.is_cpu() ? "flash_attention (the CPU flash kernel)" : "flash_attention";
    case 2:
      return "efficient_attention";
    case 3:
      return "cudnn_attention";
    case 4:
      return "overrideable";
    default:
      return "none";
  }
}

namespace {

// The bf16 matmul rate (MFU's denominator), checked for correct results at that size.
double observe_bf16_peak(const Config& config, const c10::Device& device, speedlabs::Report& report) {
  const MatmulPeak peak = measure_bf16_matmul(device, config.matmul_size);
  const double tflops = peak.tflops;
  // Is the timed kernel right? bf16 rounds each output to 8 significant bits (7 stored and the implicit leading
  // one: at most 2^-8 relative) and the
  // sums are kept in float32, so the relative Frobenius error against float32 on the same inputs is ~1e-3.
  const auto a = torch::randn({256, 256}, torch::TensorOptions().device(device)).to(torch::kBFloat16);
  const auto exact = torch::mm(a.to(torch::kFloat), a.to(torch::kFloat));
  const double error = ((torch::mm(a, a).to(torch::kFloat) - exact).norm() / exact.norm()).item<double>();
  // The verdict is about correctness (untimed); the rate travels with its repeats' evidence (spread,
  // samples, the machine's reading, a positive finite peak), shown in the table's spread column.
  auto& o = report.check("bf16_matmul_tflops",
                         "a bf16 matmul of this size gives correct results at the measured rate (MFU's denominator)",
                         json{{"tflops", tflops},
                              {"n", config.matmul_size},
                              {"relative_error", error},
                              {"median_tflops", peak.median_tflops},
                              {"repeats", peak.time.samples_ms.size()}},
                         "relative error <= 1e-2", error <= 1e-2);
  speedlabs::Evidence evidence(speedlabs::rate_of(peak.time.summary(), peak.flops / 1e12), peak.time.contention,
                               speedlabs::LoadEffect::rate);
  evidence.bounds = {speedlabs::positive_finite("peak TFLOP/s", tflops)};
  o.evidence = evidence.to_json();
  std::cout << "bf16 matmul (" << config.matmul_size << "^3): " << flops_rate(tflops) << " at best, "
            << flops_rate(peak.median_tflops) << " median on " << speedlabs::describe(device) << "\n";
  return tflops;
}

// The peaks the rungs' MFUs divide by: the bf16 matmul just measured, fp32 and tf32 measured alike (tf32 under
// torch's "high" precision, as the tf32 rung runs), and the theoretical peak of each format.
MfuPeaks measure_peaks(const Config& config, const c10::Device& device, double bf16_tflops) {
  MfuPeaks peaks;
  peaks.measured_tflops[speedlabs::PeakFormat::bf16] = bf16_tflops;
  for (const auto format : {speedlabs::PeakFormat::fp32, speedlabs::PeakFormat::tf32}) {
    peaks.measured_tflops[format] =
        speedlabs::measure_matmul_rate(device, format, config.matmul_size, peak_timing()).flops / 1e12;
  }
  for (const auto& [format, tflops] : peaks.measured_tflops) {
    peaks.theoretical[format] = speedlabs::theoretical_peak(device, format);
    std::cout << speedlabs::to_string(format) << " matmul peak: " << flops_rate(tflops) << " measured; theoretical "
              << peaks.theoretical[format].what << "\n";
  }
  return peaks;
}

// What the table's notes say about a rung, beyond its numbers.
std::string rung_detail(Rung rung, const RungRunner& runner, const Shape& shape) {
  const auto& model = runner.model_config;
  if (rung == Rung::tf32 && !runner.device.is_cuda()) {
    return "TF32 is an NVIDIA tensor-core mode: no effect on " + runner.device.str();
  }
  if (rung == Rung::sdpa) {
    return "attention backend: " +
           sdpa_backend(runner.device, shape, model.n_head, model.n_embd / model.n_head, c10::kBFloat16);
  }
  if (rung == Rung::vocab50304) {
    return "vocabulary " + std::to_string(padded_vocab_size(model.vocab_size, kVocabTile)) +
           " (useful FLOPs counted for " + std::to_string(model.vocab_size) + ")";
  }
  return "";
}

// Every rung up to config.top at one shape, each printed as it finishes.
void climb(const RungRunner& runner, Rung top, const Shape& shape, std::vector<RungResult>& rungs) {
  for (Rung rung : all_rungs()) {
    if (!at_least(top, rung)) break;
    const speedlabs::ContentionProbe probe;
    auto result = rung == Rung::cuda_graph ? runner.cuda_graph(shape) : runner.eager(rung, shape);
    result.contention = probe.read();
    if (result.detail.empty()) result.detail = rung_detail(rung, runner, shape);
    std::cout << "  " << std::left << std::setw(12) << result.name << std::right
              << (result.ran ? fixed(result.median_ms, 2) + " ms/step, first " + fixed(result.first_step_ms, 1) +
                                   " ms, " + fixed(result.tokens_per_s, 0) + " tokens/s, loss " +
                                   fixed(result.losses.front(), 4) + " -> " + fixed(result.losses.back(), 4)
                             : "not run: " + result.reason)
              << "\n"
              << std::flush;
    rungs.push_back(std::move(result));
  }
}

// The Python peers at one shape, with their rates computed like the rungs'; returns why they did not run.
std::string run_peers(const Config& config, const RungRunner& runner, const Shape& shape,
                      std::vector<RungResult>& peers) {
  const auto& device = runner.device;
  if (!device.is_cpu() && !device.is_cuda()) return "the peers run on cpu or cuda, not " + device.str();
  std::string failure;
  const speedlabs::ContentionProbe probe;  // the peers' script is a child: its CPU counts as this run's own
  auto ran = run_python_peers(config, device, shape, runner.model_config, runner.weights, runner.batches, failure);
  const speedlabs::Contention contention = probe.read();
  for (auto& peer : ran) {
    peer.contention = contention;
    peer.tflops = runner.useful_flops_per_step / (peer.median_ms / 1e3) / 1e12;
    runner.peaks.apply(peer, peer_format(peer.name));
    peer.detail = std::string("Python ") +
                  (peer.name.find("compile") != std::string::npos ? "torch.compile" : "eager") +
                  ", reference model (written-out attention)";
    peers.push_back(std::move(peer));
  }
  return failure;
}

// The sizes, as products, before any work: every step's batch is staged on the device before timing (x and y,
// int64), so steps times tokens must be countable and fit the device, or the run stops here (exit 2).
void check_sizes(const Config& config, const gpt::GPTConfig& model_config, const c10::Device& device) {
  if (config.warmup < 0 || config.steps < 1) throw speedlabs::UsageError("--warmup must be >= 0 and --steps >= 1");
  const int64_t total_steps = int64_t{config.warmup} + config.steps;
  const std::string steps_text =
      "--warmup " + std::to_string(config.warmup) + " and --steps " + std::to_string(config.steps);
  if (total_steps > std::numeric_limits<int>::max()) {
    throw speedlabs::UsageError(steps_text + " add up to more steps than can be counted: give fewer");
  }
  const auto memory = speedlabs::total_memory_bytes(device);
  for (const auto& shape : config.shapes) {
    if (shape.batch < 1) throw speedlabs::UsageError("shape " + shape.name() + ": B must be positive");
    model_config.require_sequence_fits(shape.seq, "shape " + shape.name());
    int64_t tokens = 0, bytes = 0;
    const bool overflow = __builtin_mul_overflow(shape.batch, shape.seq, &tokens) ||
                          __builtin_mul_overflow(tokens, total_steps * 2 * int64_t{sizeof(int64_t)}, &bytes);
    if (overflow || (memory && bytes > *memory)) {
      throw speedlabs::UsageError(
          steps_text + " at shape " + shape.name() + " stage " +
          (overflow ? std::string("more bytes than can be counted") : speedlabs::format_bytes(bytes)) + " of batches" +
          (memory ? "; " + device.str() + " has " + speedlabs::format_bytes(*memory) : "") + ": give fewer steps");
    }
  }
}

}  // namespace

LadderResult run(const Config& config, const c10::Device& device, speedlabs::Report& report) {
  speedlabs::install_stop_handlers();  // Ctrl-C: stop between steps, end the Python peers, remove temp files
  const auto model_config = gpt::GPTConfig::by_name(config.model);
  check_sizes(config, model_config, device);
  if (!config.results_dir.empty()) speedlabs::require_output_folder(config.results_dir);
  const auto tokens = datasets::load_shakespeare_tokens(datasets::resolve_data_dir(config.data_dir)).ids;
  const auto weights = initial_weights(model_config, config.seed);
  int64_t n_without_wpe = 0;
  for (const auto& [name, value] : weights) {
    if (name.find("wpe") == std::string::npos) n_without_wpe += value.numel();
  }

  LadderResult ladder;
  ladder.bf16_matmul_tflops = observe_bf16_peak(config, device, report);
  ladder.peaks = measure_peaks(config, device, ladder.bf16_matmul_tflops);
  // The rungs and the Python peers (child processes) run under one host-allocator policy that keeps
  // freed memory: with glibc's defaults every CPU step page-faults its big buffers in again, a cost the
  // ladder is not about and one that hits the C++ and Python sides unequally.
  std::cout << speedlabs::keep_freed_host_memory() << "\n";

  std::map<std::string, std::string> peer_failures;
  for (const auto& shape : config.shapes) {
    std::cout << "\nshape B=" << shape.batch << ", T=" << shape.seq << "\n";
    const auto batches = load_batches(tokens, shape, config.warmup + config.steps, device);
    const double useful_flops_per_step = flops_per_token(n_without_wpe, model_config.n_layer, model_config.n_head,
                                                         model_config.n_embd / model_config.n_head, shape.seq) *
                                         static_cast<double>(shape.batch * shape.seq);
    RungRunner runner{config.warmup, config.steps, config.lr, device, model_config, weights, batches};
    runner.useful_flops_per_step = useful_flops_per_step;
    runner.peaks = ladder.peaks;
    climb(runner, config.top, shape, ladder.rungs);
    if (!config.python.empty()) peer_failures[shape.name()] = run_peers(config, runner, shape, ladder.peers);
  }

  std::string markdown;
  for (const auto& shape : config.shapes) {
    const std::string table = shape_table(ladder, shape);
    std::cout << "\n" << table;
    markdown += table + "\n";
    observe_shape(config, ladder, shape, peer_failures[shape.name()], report);
  }
  observe_goals(ladder, device, report);
  if (!config.results_dir.empty()) write_results(config, ladder, markdown, device);
  return ladder;
}

}  // namespace lab06
