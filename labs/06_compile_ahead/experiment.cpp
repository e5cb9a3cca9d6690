#include "experiment.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "common/curves.h"
#include "common/device.h"
#include "common/errors.h"
#include "common/format.h"
#include "common/gpt.h"
#include "common/host_memory.h"
#include "common/memory.h"
#include "common/process.h"
#include "common/timer.h"
#include "datasets/data_files.h"
#include "datasets/data_loader.h"
#include "labs/05_gpt2/exercise.h"

#ifdef SPEEDLABS_TORCH_HAS_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace lab06 {

namespace gpt = speedlabs::gpt;
using nlohmann::json;
using speedlabs::fixed;

namespace {

// GPT-2's real vocabulary and the tile width the padded rung rounds it up to (50,304 = 128 * 393).
constexpr int64_t kVocabTile = 128;
// A model that guesses uniformly starts at ln(vocab); every rung starts from the same weights and batch,
// so step 0 differs only by arithmetic: bf16 keeps 8 significant bits (relative rounding 2^-9 = 0.2%,
// ~0.02 nat on a loss of ~11, mostly averaging out over B*T positions), TF32 10 bits, and the padded
// vocabulary adds 47 near-zero logits to the softmax (ln(50304/50257) = 0.001 nat). A wrong cast or
// mask moves step 0 by whole nats.
constexpr double kInitialLossTolerance = 0.05;
// After that the runs drift apart as different roundings give slightly different updates; lab 05 and the
// chapter's A100 logs stay within 0.1 nat of fp32 over 100 steps (bf16). 0.25 leaves room for the drift
// and still catches a broken rung (a stale graph input, a wrong optimizer step moves the loss by > 0.5).
constexpr double kTrackTolerance = 0.25;
// The Python fp32 peer runs the same model, weights, batches and foreach AdamW op sequence as the C++
// fp32 rung; only the order of some float32 sums may differ. Adam divides by each
// gradient's RMS, so rounding-level gradient differences become update differences of up to lr for
// near-zero gradients; over ~25 steps at lr 6e-4 that moves the loss by ~1e-3 at most. 1e-2 is well
// below what a real difference (another init, another mask, another optimizer) produces.
constexpr double kPeerLossTolerance = 1e-2;
// Steps the CUDA-graph rung runs eagerly (on its side stream) before capturing: cuBLAS handles,
// autocast caches and the optimizer's lazily built lists exist before the capture starts.
constexpr int kGraphEagerSteps = 3;
// The GPU goals (judged on a CUDA GPU only): C++ eager >= 1.2x Python eager at 4x128, the top rung >= 4x
// Python eager bf16 at 4x128 and >= torch.compile at 16x1024, MFU >= 50% at 16x1024.
constexpr double kGoalEagerVsPython = 1.2;
constexpr double kGoalTopVsPythonEager = 4.0;
constexpr double kGoalTopVsCompile = 1.0;
constexpr double kGoalMfu = 0.5;

bool at_least(Rung rung, Rung step) { return static_cast<int>(rung) >= static_cast<int>(step); }

// The precision mode of lab 05's training step that a rung runs in: from bf16 up every rung is bf16.
speedlabs::Precision rung_precision(Rung rung) {
  if (at_least(rung, Rung::bf16)) return speedlabs::Precision::bf16;
  return at_least(rung, Rung::tf32) ? speedlabs::Precision::tf32 : speedlabs::Precision::fp32;
}

// The precision mode a rung runs in, for the comparison with the Python peers ("" above bf16: the
// rungs from sdpa up have no Python peer of their own).
std::string peer_mode(Rung rung) { return at_least(rung, Rung::sdpa) ? "" : to_string(rung); }

// The step's batches, staged on the device before timing so that every rung and peer sees the same ones.
struct Batches {
  std::vector<torch::Tensor> x, y;  // one (B, T) pair per step
};

Batches load_batches(const std::vector<int32_t>& ids, const Shape& shape, int count, const c10::Device& device) {
  datasets::DataLoaderLite loader(ids, shape.batch, shape.seq);
  Batches batches;
  for (int i = 0; i < count; ++i) {
    const auto batch = loader.next_batch();
    batches.x.push_back(batch.x.to(device));
    batches.y.push_back(batch.y.to(device));
  }
  return batches;
}

// The initial weights of the unpadded model, by name, on the CPU.
gpt::NamedTensors initial_weights(const gpt::GPTConfig& model_config, uint64_t seed) {
  torch::manual_seed(seed);
  gpt::GPT model(model_config);
  gpt::NamedTensors weights;
  for (const auto& item : model->named_parameters()) weights.emplace_back(item.key(), item.value().detach().clone());
  return weights;
}

// A model for @p rung holding the initial weights; the padded vocabulary's extra rows start at zero
// (no batch ever contains or targets those ids, so they only add near-zero logits).
gpt::GPT build_model(const gpt::GPTConfig& base, Rung rung, const gpt::NamedTensors& weights,
                     const c10::Device& device) {
  gpt::GPTConfig config = base;
  if (at_least(rung, Rung::vocab50304)) config.vocab_size = padded_vocab_size(base.vocab_size, kVocabTile);
  // Below sdpa the chapter's written-out attention: lab 05's causal_attention.
  gpt::GPT model(config, at_least(rung, Rung::sdpa) ? gpt::AttentionFn(gpt::fused_causal_attention)
                                                    : gpt::AttentionFn(lab05::causal_attention));
  auto params = model->named_parameters();
  torch::NoGradGuard no_grad;
  for (const auto& [name, value] : weights) {
    auto& target = params[name];
    if (target.sizes() == value.sizes()) {
      target.copy_(value);
    } else {  // the padded token embedding
      target.zero_();
      target.narrow(0, 0, value.size(0)).copy_(value);
    }
  }
  model->to(device);
  return model;
}

double median_of(std::vector<double> samples) { return speedlabs::summarize(std::move(samples)).median_ms; }

// Model FLOPs utilisation: useful FLOP/s over the measured bf16 matmul peak. Only on a CUDA GPU: there the
// rungs that matter run bf16 on the tensor cores the peak measures; a CPU's fp32 rungs against its bf16
// peak gave 140% (and any ratio to a peak of another dtype says nothing), so elsewhere it is NaN ("n/a").
double mfu_of(double tflops, double bf16_peak_tflops, const c10::Device& device) {
  return device.is_cuda() && bf16_peak_tflops > 0 ? tflops / bf16_peak_tflops : std::nan("");
}

// A rate readable on a CPU (tens of GFLOP/s) and on a GPU (hundreds of TFLOP/s).
std::string flops_rate(double tflops) {
  return tflops >= 1 ? fixed(tflops, 2) + " TFLOP/s" : fixed(tflops * 1e3, 1) + " GFLOP/s";
}

// Ctrl-C or SIGTERM (install_stop_handlers, in run) stops the ladder between two steps.
void stop_if_asked(const std::string& rung) {
  if (speedlabs::stop_requested()) throw speedlabs::RuntimeFailure("interrupted during the " + rung + " rung");
}

// One rung's training steps at one shape, each timed through common/timer.
struct RungRunner {
  const Config& config;
  const c10::Device& device;
  const gpt::GPTConfig& model_config;
  const gpt::NamedTensors& weights;
  const Batches& batches;
  double useful_flops_per_step;
  double bf16_tflops;

  int total_steps() const { return config.warmup + config.steps; }

  // Fills the timing fields from per-step times; @p fast_from is the first step in the rung's final form.
  void summarize_times(RungResult& result, const std::vector<double>& times, int fast_from) const {
    result.first_step_ms = 0;
    for (int i = 0; i <= fast_from; ++i) result.first_step_ms += times[i];
    result.median_ms = median_of({times.begin() + config.warmup, times.end()});
    const double tokens = static_cast<double>(result.shape.batch * result.shape.seq);
    result.tokens_per_s = tokens / (result.median_ms / 1e3);
    result.tflops = useful_flops_per_step / (result.median_ms / 1e3) / 1e12;
    result.mfu = mfu_of(result.tflops, bf16_tflops, device);
  }

  RungResult eager(Rung rung, const Shape& shape) const {
    RungResult result;
    result.name = to_string(rung);
    result.shape = shape;
    speedlabs::reset_peak_memory(device);
    auto model = build_model(model_config, rung, weights, device);
    std::unique_ptr<torch::optim::Optimizer> optimizer;
    if (at_least(rung, Rung::fused_adamw)) {
      optimizer = std::make_unique<FusedAdamW>(model->parameters(), config.lr);
    } else {
      optimizer = std::make_unique<ForeachAdamW>(model->parameters(), config.lr);
    }
    lab03::GradScaler unused_scaler;  // lab 05's train_step uses it in fp16 only; no rung is fp16
    const auto precision = rung_precision(rung);
    auto losses = torch::zeros({total_steps()}, torch::TensorOptions().device(device));
    std::vector<double> times;
    for (int i = 0; i < total_steps(); ++i) {
      stop_if_asked(result.name);
      times.push_back(speedlabs::time_once_ms(
          [&] {
            const auto loss = lab05::train_step(model, *optimizer, unused_scaler, batches.x[i], batches.y[i], precision);
            losses[i].copy_(loss);
          },
          device));
    }
    summarize_times(result, times, 0);
    result.peak_bytes = speedlabs::peak_memory_bytes(device);
    result.losses = std::vector<double>(losses.cpu().data_ptr<float>(), losses.cpu().data_ptr<float>() + total_steps());
    result.ran = true;
    return result;
  }

  RungResult graph(const Shape& shape) const {
    RungResult result;
    result.name = to_string(Rung::cuda_graph);
    result.shape = shape;
#ifdef SPEEDLABS_TORCH_HAS_CUDA
    if (!device.is_cuda()) {
      result.reason = "CUDA graphs need a CUDA GPU; this run is on " + device.str();
      return result;
    }
    if (total_steps() <= kGraphEagerSteps) {
      result.reason = "needs more than " + std::to_string(kGraphEagerSteps) + " steps (eager ones before the capture)";
      return result;
    }
    speedlabs::reset_peak_memory(device);
    auto model = build_model(model_config, Rung::cuda_graph, weights, device);
    FusedAdamW optimizer(model->parameters(), config.lr);
    lab03::GradScaler unused_scaler;  // lab 05's train_step uses it in fp16 only
    const auto precision = rung_precision(Rung::cuda_graph);
    auto losses = torch::zeros({total_steps()}, torch::TensorOptions().device(device));
    // A graph is captured on a side stream (never the legacy default stream); the timer's events go
    // on the current stream, so the whole rung runs with the side stream current.
    speedlabs::synchronize(device);
    c10::cuda::CUDAStreamGuard side_stream(c10::cuda::getStreamFromPool(false, device.index()));
    // The graph reads its inputs from fixed addresses: each step copies its batch there.
    auto static_x = batches.x[0].clone();
    auto static_y = batches.y[0].clone();
    const auto step = [&] { return lab05::train_step(model, optimizer, unused_scaler, static_x, static_y, precision); };
    at::cuda::CUDAGraph graph;
    torch::Tensor static_loss;
    std::vector<double> times;
    try {
      for (int i = 0; i < total_steps(); ++i) {
        times.push_back(speedlabs::time_once_ms(
            [&] {
              static_x.copy_(batches.x[i]);
              static_y.copy_(batches.y[i]);
              if (i < kGraphEagerSteps) {
                losses[i].copy_(step());
                return;
              }
              // Recorded, not run: every kernel of forward, backward and the fused AdamW step, with the
              // addresses it touches, becomes one graph that replay() launches in one call.
              if (i == kGraphEagerSteps) static_loss = capture_train_step(graph, step, optimizer);
              graph.replay();
              losses[i].copy_(static_loss);
            },
            device));
      }
    } catch (const c10::Error& error) {
      result.reason = std::string("the capture or replay failed: ") + error.what_without_backtrace();
      return result;
    }
    summarize_times(result, times, kGraphEagerSteps);
    result.peak_bytes = speedlabs::peak_memory_bytes(device);
    const auto host_losses = losses.cpu();
    result.losses = std::vector<double>(host_losses.data_ptr<float>(), host_losses.data_ptr<float>() + total_steps());
    result.detail = std::to_string(kGraphEagerSteps) + " eager steps, capture, then replays";
    result.ran = true;
#else
    result.reason = "this libtorch was built without CUDA (CUDA graphs need a CUDA libtorch and GPU)";
#endif
    return result;
  }
};

// Files that one run of the Python peers needs, removed on every way out (an exception, an interrupt).
struct TemporaryFiles {
  std::vector<std::string> paths;
  ~TemporaryFiles() {
    std::error_code ignored;
    for (const auto& path : paths) std::filesystem::remove(path, ignored);
  }
};

// Runs tests/reference/gpt_peers.py on the same weights and batches; returns its peers or a reason.
std::vector<RungResult> run_python_peers(const Config& config, const c10::Device& device, const Shape& shape,
                                         const gpt::GPTConfig& model_config, const gpt::NamedTensors& weights,
                                         const Batches& batches, std::string& failure) {
  namespace fs = std::filesystem;
  const int total = config.warmup + config.steps;
  gpt::NamedTensors state;
  state.emplace_back("config", torch::tensor({model_config.block_size, model_config.vocab_size, model_config.n_layer,
                                              model_config.n_head, model_config.n_embd}, torch::kLong));
  const AdamWHyperparameters hyper;  // the constants every rung's AdamW uses
  state.emplace_back("adamw", torch::tensor({config.lr, hyper.beta1, hyper.beta2, hyper.eps, hyper.weight_decay},
                                            torch::kFloat));
  for (const auto& [name, value] : weights) state.emplace_back("param/" + name, value);
  state.emplace_back("x", torch::stack(std::vector<torch::Tensor>(batches.x.begin(), batches.x.begin() + total)));
  state.emplace_back("y", torch::stack(std::vector<torch::Tensor>(batches.y.begin(), batches.y.begin() + total)));
  const fs::path stem = fs::temp_directory_path() / ("speedlabs-lab06-" + std::to_string(getpid()) + "-" + shape.name());
  // The state for the peers, their result, and the result while gpt_peers.py writes it.
  const TemporaryFiles temporary{{stem.string() + ".spdl", stem.string() + ".json", stem.string() + ".json.tmp"}};
  const std::string& state_file = temporary.paths[0];
  const std::string& result_file = temporary.paths[1];
  gpt::write_tensor_file(state_file, state);

  const auto joined = [](const std::vector<std::string>& items) {
    std::string text;
    for (const auto& item : items) text += (text.empty() ? "" : ",") + item;
    return text;
  };
  const std::string device_name = device.is_cuda() ? "cuda:" + std::to_string(device.has_index() ? device.index() : 0)
                                                   : "cpu";
  // An argv vector, never a shell: no path (--python, the temp folder) can become a command.
  const std::vector<std::string> argv{config.python, SPEEDLABS_SOURCE_DIR "/tests/reference/gpt_peers.py",
                                      "--state", state_file, "--out", result_file, "--device", device_name,
                                      "--modes", joined(config.peer_modes), "--compile-modes",
                                      joined(config.compile_modes), "--warmup", std::to_string(config.warmup),
                                      "--steps", std::to_string(config.steps)};
  // The C++ side's cached memory would otherwise sit unused next to the peers' on the same GPU.
  if (!device.is_cpu()) c10::getDeviceAllocator(device.type())->emptyCache();
  std::cout << "  python peers:";
  for (const auto& arg : argv) std::cout << " " << arg;
  std::cout << "\n" << std::flush;
  speedlabs::ProcessResult process;
  try {
    process = speedlabs::run_process(argv);
  } catch (const speedlabs::RuntimeFailure& error) {  // the Python could not be started at all
    failure = error.what();
    return {};
  }
  if (process.interrupted) {
    throw speedlabs::RuntimeFailure("interrupted while the Python peers ran (" + shape.name() +
                                    "); they were stopped and their temporary files removed");
  }
  if (!process.ok()) {
    std::cerr << process.output;
    failure = "gpt_peers.py failed (" + process.describe() + "); its output is printed above";
    return {};
  }
  std::ifstream result_in(result_file);
  if (!result_in) {
    failure = "gpt_peers.py exited 0 without writing " + result_file;
    return {};
  }
  const std::string output((std::istreambuf_iterator<char>(result_in)), std::istreambuf_iterator<char>());
  std::vector<RungResult> peers;
  try {
    const json printed = json::parse(output);  // kept alive: the loop below walks a part of it
    for (const auto& peer : printed.at("peers")) {
      RungResult result;
      result.name = peer.at("name").get<std::string>();
      result.shape = shape;
      result.ran = true;
      result.first_step_ms = peer.at("first_step_ms").get<double>();
      result.median_ms = peer.at("median_ms").get<double>();
      result.tokens_per_s = peer.at("tokens_per_s").get<double>();
      result.losses = peer.at("losses").get<std::vector<double>>();
      if (peer.contains("peak_bytes") && !peer.at("peak_bytes").is_null()) {
        result.peak_bytes = peer.at("peak_bytes").get<int64_t>();
      }
      peers.push_back(std::move(result));
    }
  } catch (const json::exception& error) {
    failure = std::string("gpt_peers.py wrote no valid result: ") + error.what();
    return {};
  }
  return peers;
}

// Largest |loss - other loss| over the steps both ran (or step 0 alone); NaN when a compared loss is not finite.
double max_loss_gap(const RungResult& a, const RungResult& b, bool first_only = false) {
  return speedlabs::max_abs_gap(a.losses, b.losses, first_only ? 1 : a.losses.size());
}

bool all_finite(const std::vector<double>& values) {
  return std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
}

const RungResult* find(const std::vector<RungResult>& results, const std::string& name, const Shape& shape) {
  for (const auto& r : results) {
    if (r.name == name && r.shape.batch == shape.batch && r.shape.seq == shape.seq && r.ran) return &r;
  }
  return nullptr;
}

const RungResult* top_rung(const std::vector<RungResult>& rungs, const Shape& shape) {
  const RungResult* top = nullptr;
  for (const auto& r : rungs) {
    if (r.ran && r.shape.batch == shape.batch && r.shape.seq == shape.seq) top = &r;
  }
  return top;
}

json to_json(const RungResult& r) {
  json j = {{"name", r.name}, {"shape", r.shape.name()}, {"ran", r.ran}};
  if (!r.ran) {
    j["reason"] = r.reason;
    return j;
  }
  j.update({{"first_step_ms", r.first_step_ms}, {"median_ms", r.median_ms}, {"tokens_per_s", r.tokens_per_s},
            {"tflops", r.tflops}, {"mfu", r.mfu}, {"losses", r.losses}, {"detail", r.detail},
            {"peak_bytes", r.peak_bytes ? json(*r.peak_bytes) : json(nullptr)}});
  return j;
}

// The ladder and the peers of one shape as a markdown table, then the ratios the GPU goals are about.
std::string shape_table(const LadderResult& ladder, const Shape& shape) {
  std::ostringstream out;
  const RungResult* fp32 = find(ladder.rungs, "fp32", shape);
  out << "### B=" << shape.batch << ", T=" << shape.seq << "\n\n"
      << "| step | ms/step (median) | first step ms | tokens/s | x C++ fp32 | TFLOP/s | MFU | peak MiB | loss first -> last "
         "| max abs loss gap to C++ fp32 | notes |\n"
      << "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|\n";
  auto row = [&](const RungResult& r) {
    if (r.shape.batch != shape.batch || r.shape.seq != shape.seq) return;
    if (!r.ran) {
      out << "| " << r.name << " | - | - | - | - | - | - | - | - | - | not run: " << r.reason << " |\n";
      return;
    }
    out << "| " << r.name << " | " << fixed(r.median_ms, 2) << " | " << fixed(r.first_step_ms, 1) << " | "
        << fixed(r.tokens_per_s, 0) << " | " << (fp32 ? fixed(r.tokens_per_s / fp32->tokens_per_s, 2) : "-") << " | "
        << fixed(r.tflops, 3) << " | " << (std::isnan(r.mfu) ? "n/a" : fixed(100 * r.mfu, 1) + "%") << " | "
        << (r.peak_bytes ? fixed(static_cast<double>(*r.peak_bytes) / (1 << 20), 0) : "n/a") << " | "
        << fixed(r.losses.front(), 4) << " -> " << fixed(r.losses.back(), 4) << " | "
        << (fp32 ? fixed(max_loss_gap(r, *fp32), 4) : "-") << " | " << r.detail << " |\n";
  };
  for (const auto& r : ladder.rungs) row(r);
  for (const auto& r : ladder.peers) row(r);
  out << "\n";
  for (const auto& r : ladder.rungs) {
    const std::string mode = r.ran ? peer_mode(parse_rung(r.name)) : "";
    const RungResult* peer = mode.empty() ? nullptr : find(ladder.peers, "python_eager_" + mode, shape);
    if (peer && r.shape.name() == shape.name()) {
      out << "- C++ " << r.name << " / Python eager " << mode << ": " << fixed(r.tokens_per_s / peer->tokens_per_s, 2)
          << "x tokens/s\n";
    }
  }
  if (const RungResult* top = top_rung(ladder.rungs, shape)) {
    for (const auto& peer : ladder.peers) {
      if (peer.shape.name() == shape.name()) {
        out << "- C++ top rung (" << top->name << ") / " << peer.name << ": "
            << fixed(top->tokens_per_s / peer.tokens_per_s, 2) << "x tokens/s\n";
      }
    }
  }
  return out.str();
}

// Records the rungs', the losses' and the peers' observations of one shape.
void observe_shape(const Config& config, const LadderResult& ladder, const Shape& shape,
                   const std::string& peer_failure, speedlabs::Report& report) {
  const std::string suffix = "_" + shape.name();
  const RungResult* fp32 = find(ladder.rungs, "fp32", shape);
  double initial_gap = 0, track_gap = 0;
  json initial_gaps = json::object(), track_gaps = json::object();
  for (const auto& r : ladder.rungs) {
    if (r.shape.name() != shape.name()) continue;
    const std::string id = "rung_" + r.name + suffix;
    const std::string claim = "rung " + r.name + " trains at B=" + std::to_string(shape.batch) + ", T=" +
                              std::to_string(shape.seq) + " with every loss finite";
    if (!r.ran) {
      report.not_applicable(id, claim, "every loss finite", r.reason);
      continue;
    }
    json measured = to_json(r);
    if (fp32) measured["speedup_vs_fp32"] = r.tokens_per_s / fp32->tokens_per_s;
    report.check(id, claim, measured, "every loss finite", all_finite(r.losses));
    if (fp32 && &r != fp32) {
      initial_gaps[r.name] = max_loss_gap(r, *fp32, true);
      track_gaps[r.name] = max_loss_gap(r, *fp32);
      initial_gap = speedlabs::worst_gap(initial_gap, max_loss_gap(r, *fp32, true));
      track_gap = speedlabs::worst_gap(track_gap, max_loss_gap(r, *fp32));
    }
  }
  if (fp32 && !initial_gaps.empty()) {
    report.check("initial_losses_agree" + suffix, "every rung's step-0 loss is fp32's, up to rounding", initial_gaps,
                 "max |loss0 - fp32 loss0| <= " + fixed(kInitialLossTolerance, 2) + " nat",
                 initial_gap <= kInitialLossTolerance);
    report.check("losses_track_fp32" + suffix, "every rung's loss tracks fp32's at every step", track_gaps,
                 "max |loss - fp32 loss| <= " + fixed(kTrackTolerance, 2) + " nat", track_gap <= kTrackTolerance);
  } else {
    report.not_applicable("losses_track_fp32" + suffix, "every rung's loss tracks fp32's at every step",
                          "max |loss - fp32 loss| <= " + fixed(kTrackTolerance, 2) + " nat",
                          "needs the fp32 rung and at least one rung above it");
  }

  const std::string peers_claim = "the Python reference model runs in the same run on the same weights and batches";
  std::vector<const RungResult*> peers;
  for (const auto& p : ladder.peers) {
    if (p.shape.name() == shape.name()) peers.push_back(&p);
  }
  if (config.python.empty()) {
    report.not_applicable("python_peers" + suffix, peers_claim, "every peer ran",
                          "no Python with torch configured (--python, or SPEEDLABS_PYTHON at configure time)");
  } else {
    json names = json::array();
    for (const auto* p : peers) names.push_back(p->name);
    report.check("python_peers" + suffix, peers_claim, peer_failure.empty() ? json(names) : json(peer_failure),
                 "every peer ran with finite losses",
                 peer_failure.empty() && !peers.empty() &&
                     std::all_of(peers.begin(), peers.end(), [](const auto* p) { return all_finite(p->losses); }));
  }
  const RungResult* python_fp32 = find(ladder.peers, "python_eager_fp32", shape);
  const std::string parity_claim = "the Python eager fp32 peer's losses match the C++ fp32 rung's at every step";
  const std::string parity_expected = "max |diff| <= " + fixed(kPeerLossTolerance, 3) + " nat";
  if (python_fp32 && fp32) {
    const double gap = max_loss_gap(*python_fp32, *fp32);
    report.check("python_eager_matches_cpp_fp32" + suffix, parity_claim, gap, parity_expected,
                 gap <= kPeerLossTolerance);
  } else {
    report.not_applicable("python_eager_matches_cpp_fp32" + suffix, parity_claim, parity_expected,
                          "needs the C++ fp32 rung and the Python eager fp32 peer");
  }

  // torch.compile fuses ops and keeps some intermediates in float32, so its losses drift from the eager
  // ones like a rung's from fp32's: the rungs' tolerance. A miscompiled step moves them by whole nats.
  const std::string compile_claim = "each torch.compile peer's losses track the C++ rung of its precision";
  const std::string compile_expected = "max |diff| <= " + fixed(kTrackTolerance, 2) + " nat";
  json compile_gaps = json::object();
  bool compile_tracks = true;
  const std::string compile_prefix = "python_compile_";
  for (const auto* p : peers) {
    if (p->name.rfind(compile_prefix, 0) != 0) continue;
    const RungResult* cpp = find(ladder.rungs, p->name.substr(compile_prefix.size()), shape);
    if (!cpp) continue;
    const double gap = max_loss_gap(*p, *cpp);
    compile_gaps[p->name] = gap;
    compile_tracks = compile_tracks && gap <= kTrackTolerance;
  }
  if (compile_gaps.empty()) {
    report.not_applicable("python_compile_tracks_cpp" + suffix, compile_claim, compile_expected,
                          "no torch.compile peer ran next to its C++ rung (GPU runs, or --compile-modes on a CPU)");
  } else {
    report.check("python_compile_tracks_cpp" + suffix, compile_claim, compile_gaps, compile_expected, compile_tracks);
  }
}

// A GPU goal: a ratio against a threshold, judged only on a CUDA GPU (where the goals are set).
void goal(speedlabs::Report& report, const c10::Device& device, const std::string& id, const std::string& claim,
          std::optional<double> value, json measured, double threshold, const std::string& missing) {
  const std::string expected = ">= " + fixed(threshold, 2) + " (a GPU goal, judged on a CUDA GPU)";
  if (!value) {
    report.not_applicable(id, claim, expected, missing, /*must_hold=*/false);
    return;
  }
  if (!device.is_cuda()) {
    speedlabs::Observation o{id, claim, measured, expected, speedlabs::Verdict::not_applicable, false,
                             "the goals are set for a CUDA GPU; this run is on " + device.str()};
    report.add(o);
    return;
  }
  report.check(id, claim, measured, expected, *value >= threshold, /*must_hold=*/false);
}

void observe_goals(const LadderResult& ladder, const c10::Device& device, speedlabs::Report& report) {
  const Shape small{4, 128}, large{16, 1024};
  {
    std::optional<double> worst;
    json ratios = json::object();
    for (const std::string mode : {"fp32", "tf32", "bf16"}) {
      const RungResult* cpp = find(ladder.rungs, mode, small);
      const RungResult* py = find(ladder.peers, "python_eager_" + mode, small);
      if (!cpp || !py) continue;
      ratios[mode] = cpp->tokens_per_s / py->tokens_per_s;
      worst = std::min(worst.value_or(ratios[mode].get<double>()), ratios[mode].get<double>());
    }
    goal(report, device, "goal_cpp_eager_vs_python_eager_4x128",
         "C++ eager tokens/s over Python eager tokens/s in each precision at B=4, T=128 (the smallest ratio)", worst,
         ratios, kGoalEagerVsPython, "needs the C++ rungs fp32..bf16 and their Python eager peers at 4x128");
  }
  auto top_ratio = [&](const Shape& shape, const std::string& peer_name) -> std::pair<std::optional<double>, json> {
    const RungResult* top = top_rung(ladder.rungs, shape);
    const RungResult* peer = find(ladder.peers, peer_name, shape);
    if (!top || !peer) return {std::nullopt, nullptr};
    const double ratio = top->tokens_per_s / peer->tokens_per_s;
    return {ratio, json{{"top_rung", top->name}, {"ratio", ratio}}};
  };
  const auto [eager_ratio, eager_json] = top_ratio(small, "python_eager_bf16");
  goal(report, device, "goal_top_rung_vs_python_eager_bf16_4x128",
       "the top rung's tokens/s over Python eager bf16 at B=4, T=128", eager_ratio, eager_json, kGoalTopVsPythonEager,
       "needs the 4x128 ladder and the Python eager bf16 peer");
  const auto [compile_ratio, compile_json] = top_ratio(large, "python_compile_bf16");
  goal(report, device, "goal_top_rung_vs_python_compile_bf16_16x1024",
       "the top rung's tokens/s over Python torch.compile bf16 at B=16, T=1024", compile_ratio, compile_json,
       kGoalTopVsCompile, "needs the 16x1024 ladder and the torch.compile bf16 peer");
  const RungResult* top = top_rung(ladder.rungs, large);
  goal(report, device, "goal_top_rung_mfu_16x1024",
       "the top rung's MFU at B=16, T=1024 (useful FLOP/s over the measured bf16 matmul rate)",
       top ? std::optional<double>(top->mfu) : std::nullopt,
       top ? json{{"top_rung", top->name}, {"mfu", top->mfu}, {"tflops", top->tflops}} : json(nullptr), kGoalMfu,
       "needs the 16x1024 ladder");
}

void write_results(const Config& config, const LadderResult& ladder, const std::string& markdown,
                   const c10::Device& device) {
  namespace fs = std::filesystem;
  fs::create_directories(config.results_dir);
  json j = {{"device", speedlabs::describe(device)},
            {"libtorch", speedlabs::libtorch_version()},
            {"model", config.model},
            {"warmup", config.warmup},
            {"steps", config.steps},
            {"lr", config.lr},
            {"bf16_matmul_tflops", ladder.bf16_matmul_tflops},
            {"matmul_size", config.matmul_size},
            {"rungs", json::array()},
            {"peers", json::array()}};
  for (const auto& r : ladder.rungs) j["rungs"].push_back(to_json(r));
  for (const auto& r : ladder.peers) j["peers"].push_back(to_json(r));
  speedlabs::write_file_atomically((fs::path(config.results_dir) / "ladder.json").string(), j.dump(2) + "\n");
  speedlabs::write_file_atomically((fs::path(config.results_dir) / "ladder.md").string(), markdown);
  // gnuplot data: one block per shape (separated by two blank lines), "label tokens_per_s".
  std::ostringstream dat;
  for (const auto& shape : config.shapes) {
    dat << "# " << shape.name() << "\n";
    for (const auto* list : {&ladder.rungs, &ladder.peers}) {
      for (const auto& r : *list) {
        if (r.ran && r.shape.name() == shape.name()) dat << '"' << r.name << "\" " << r.tokens_per_s << "\n";
      }
    }
    dat << "\n\n";
  }
  speedlabs::write_file_atomically((fs::path(config.results_dir) / "ladder.dat").string(), dat.str());
}

}  // namespace

const std::vector<Rung>& all_rungs() {
  static const std::vector<Rung> rungs{Rung::fp32,       Rung::tf32,        Rung::bf16,      Rung::sdpa,
                                       Rung::vocab50304, Rung::fused_adamw, Rung::cuda_graph};
  return rungs;
}

std::string to_string(Rung rung) {
  switch (rung) {
    case Rung::fp32: return "fp32";
    case Rung::tf32: return "tf32";
    case Rung::bf16: return "bf16";
    case Rung::sdpa: return "sdpa";
    case Rung::vocab50304: return "vocab50304";
    case Rung::fused_adamw: return "fused_adamw";
    case Rung::cuda_graph: return "cuda_graph";
  }
  return "?";
}

Rung parse_rung(const std::string& name) {
  for (Rung rung : all_rungs()) {
    if (to_string(rung) == name) return rung;
  }
  throw speedlabs::UsageError("unknown rung '" + name +
                              "': choose fp32, tf32, bf16, sdpa, vocab50304, fused_adamw or cuda_graph");
}

std::string Shape::name() const { return std::to_string(batch) + "x" + std::to_string(seq); }

void adapt_to_cpu(Config& config) {
  config.shapes = {{4, 128}};
  config.matmul_size = 1024;
  config.compile_modes.clear();
}

Config quick_config() {
  Config config;
  config.model = "tiny";
  config.shapes = {{2, 32}};
  config.warmup = 2;
  config.steps = 4;
  config.matmul_size = 256;
  config.peer_modes = {"fp32", "bf16"};
  config.compile_modes.clear();
  return config;
}

int64_t padded_vocab_size(int64_t vocab_size, int64_t multiple) {
  if (vocab_size <= 0 || multiple <= 0) {
    throw speedlabs::UsageError("padded_vocab_size: vocab_size (" + std::to_string(vocab_size) + ") and multiple (" +
                                std::to_string(multiple) + ") must be positive");
  }
  return (vocab_size + multiple - 1) / multiple * multiple;
}

double flops_per_token(int64_t n_params_without_wpe, int64_t n_layer, int64_t n_head, int64_t head_size, int64_t seq) {
  return 6.0 * static_cast<double>(n_params_without_wpe) +
         12.0 * static_cast<double>(n_layer) * static_cast<double>(n_head) * static_cast<double>(head_size) *
             static_cast<double>(seq);
}

double measure_bf16_matmul_tflops(const c10::Device& device, int64_t n) {
  if (n < 1) throw speedlabs::UsageError("the matmul size must be positive, not " + std::to_string(n));
  const auto options = torch::TensorOptions().device(device).dtype(torch::kBFloat16);
  const auto a = torch::randn({n, n}, options), b = torch::randn({n, n}, options);
  auto c = torch::empty({n, n}, options);
  const auto stats = speedlabs::time_ms([&] { at::mm_out(c, a, b); }, device, {3, 10});
  return 2.0 * static_cast<double>(n) * n * n / (stats.median_ms / 1e3) / 1e12;
}

std::string sdpa_backend(const c10::Device& device, const Shape& shape, int64_t n_head, int64_t head_size,
                         c10::ScalarType dtype) {
  const auto q = torch::zeros({shape.batch, n_head, shape.seq, head_size}, torch::TensorOptions().device(device).dtype(dtype));
  // The numbers of sdp::SDPBackend (ATen/native/transformers/sdp_utils_cpp.h).
  switch (at::_fused_sdp_choice(q, q, q, {}, 0.0, /*is_causal=*/true)) {
    case 0: return "math";
    case 1: return device.is_cpu() ? "flash_attention (the CPU flash kernel)" : "flash_attention";
    case 2: return "efficient_attention";
    case 3: return "cudnn_attention";
    case 4: return "overrideable";
    default: return "none";
  }
}

LadderResult run(const Config& config, const c10::Device& device, speedlabs::Report& report) {
  speedlabs::install_stop_handlers();  // Ctrl-C: stop between steps, end the Python peers, remove temp files
  if (config.warmup < 0 || config.steps < 1) {
    throw speedlabs::UsageError("--warmup must be >= 0 and --steps >= 1");
  }
  const auto model_config = gpt::GPTConfig::by_name(config.model);
  for (const auto& shape : config.shapes) {
    if (shape.batch < 1 || shape.seq < 1 || shape.seq > model_config.block_size) {
      throw speedlabs::UsageError("shape " + shape.name() + ": B and T must be positive and T at most " +
                                  std::to_string(model_config.block_size));
    }
  }
  const auto tokens = datasets::load_shakespeare_tokens(datasets::resolve_data_dir(config.data_dir)).ids;
  const auto weights = initial_weights(model_config, config.seed);
  int64_t n_without_wpe = 0;
  for (const auto& [name, value] : weights) {
    if (name.find("wpe") == std::string::npos) n_without_wpe += value.numel();
  }
  const int64_t head_size = model_config.n_embd / model_config.n_head;

  LadderResult ladder;
  {
    ladder.bf16_matmul_tflops = measure_bf16_matmul_tflops(device, config.matmul_size);
    // Is the timed kernel right? bf16 rounds each output to 8 significant bits (2^-9 relative) and the
    // sums are kept in float32, so the relative Frobenius error against float32 on the same inputs is ~1e-3.
    const auto a = torch::randn({256, 256}, torch::TensorOptions().device(device)).to(torch::kBFloat16);
    const auto exact = torch::mm(a.to(torch::kFloat), a.to(torch::kFloat));
    const double error = ((torch::mm(a, a).to(torch::kFloat) - exact).norm() / exact.norm()).item<double>();
    report.check("bf16_matmul_tflops", "a bf16 matmul of this size gives correct results at the measured rate (MFU's "
                 "denominator)",
                 json{{"tflops", ladder.bf16_matmul_tflops}, {"n", config.matmul_size}, {"relative_error", error}},
                 "relative error <= 1e-2", error <= 1e-2);
  }
  std::cout << "bf16 matmul (" << config.matmul_size << "^3): " << flops_rate(ladder.bf16_matmul_tflops)
            << " on " << speedlabs::describe(device) << "\n";
  // The rungs and the Python peers (child processes) run under one host-allocator policy that keeps
  // freed memory: with glibc's defaults every CPU step page-faults its big buffers in again, a cost the
  // ladder is not about and one that hits the C++ and Python sides unequally.
  std::cout << speedlabs::keep_freed_host_memory() << "\n";

  std::map<std::string, std::string> peer_failures;
  std::string markdown;
  for (const auto& shape : config.shapes) {
    std::cout << "\nshape B=" << shape.batch << ", T=" << shape.seq << "\n";
    const auto batches = load_batches(tokens, shape, config.warmup + config.steps, device);
    const double useful_flops_per_step =
        flops_per_token(n_without_wpe, model_config.n_layer, model_config.n_head, head_size, shape.seq) *
        static_cast<double>(shape.batch * shape.seq);
    const RungRunner runner{config, device, model_config, weights, batches, useful_flops_per_step,
                            ladder.bf16_matmul_tflops};
    for (Rung rung : all_rungs()) {
      if (!at_least(config.top, rung)) break;
      auto result = rung == Rung::cuda_graph ? runner.graph(shape) : runner.eager(rung, shape);
      if (rung == Rung::tf32 && !device.is_cuda()) {
        result.detail = "TF32 is an NVIDIA tensor-core mode: no effect on " + device.str();
      }
      if (rung == Rung::sdpa) {
        result.detail = "attention backend: " + sdpa_backend(device, shape, model_config.n_head, head_size,
                                                             c10::kBFloat16);
      }
      if (rung == Rung::vocab50304) {
        result.detail = "vocabulary " + std::to_string(padded_vocab_size(model_config.vocab_size, kVocabTile)) +
                        " (useful FLOPs counted for " + std::to_string(model_config.vocab_size) + ")";
      }
      std::cout << "  " << std::left << std::setw(12) << result.name << std::right
                << (result.ran ? fixed(result.median_ms, 2) + " ms/step, first " + fixed(result.first_step_ms, 1) +
                                     " ms, " + fixed(result.tokens_per_s, 0) + " tokens/s, loss " +
                                     fixed(result.losses.front(), 4) + " -> " + fixed(result.losses.back(), 4)
                               : "not run: " + result.reason)
                << "\n" << std::flush;
      ladder.rungs.push_back(std::move(result));
    }
    if (!config.python.empty()) {
      if (device.is_cpu() || device.is_cuda()) {
        auto peers = run_python_peers(config, device, shape, model_config, weights, batches, peer_failures[shape.name()]);
        for (auto& peer : peers) {
          peer.tflops = useful_flops_per_step / (peer.median_ms / 1e3) / 1e12;
          peer.mfu = mfu_of(peer.tflops, ladder.bf16_matmul_tflops, device);
          peer.detail = "Python " + std::string(peer.name.find("compile") != std::string::npos ? "torch.compile" : "eager") +
                        ", reference model (written-out attention)";
          ladder.peers.push_back(std::move(peer));
        }
      } else {
        peer_failures[shape.name()] = "the peers run on cpu or cuda, not " + device.str();
      }
    }
  }
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
