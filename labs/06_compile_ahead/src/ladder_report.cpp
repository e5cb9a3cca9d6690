#include "ladder_report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <sstream>

#include "common/curves.h"
#include "common/device.h"
#include "common/files.h"
#include "common/format.h"
#include "common/sequential.h"
#include "rungs.h"

namespace lab06 {

using nlohmann::json;
using speedlabs::fixed;

namespace {

// Every rung starts from the same weights and batch, so step 0 differs from fp32's only by arithmetic: counting the
// implicit leading bit, bf16 keeps 8 significant bits (relative rounding up to 2^-8 = 0.4%, at most ~0.04 nat on a
// loss of ~11, mostly averaging out over B*T positions), TF32 11 (2^-11), and the padded vocabulary adds 47 near-zero
// logits to the softmax (ln(50304/50257) = 0.001 nat). A wrong cast or mask moves step 0 by whole nats.
constexpr double kStepZeroAgreement = 0.05;
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
// The GPU goals (judged on a CUDA GPU only): C++ eager >= 1.2x Python eager at 4x128, the top rung >= 4x
// Python eager bf16 at 4x128 and >= torch.compile at 16x1024, MFU >= 50% at 16x1024.
constexpr double kGoalEagerVsPython = 1.2;
constexpr double kGoalTopVsPythonEager = 4.0;
constexpr double kGoalTopVsCompile = 1.0;
constexpr double kGoalMfu = 0.5;
// The MFU's peak is the best repeat of a matmul in the rung's format; a training step's useful FLOP/s above it would
// mean the peak was measured wrong (a peak is never below a rate just achieved). 5% for the rounding of
// the FLOP count (6 N + 12 L H Q T is an estimate).
constexpr double kPeakTolerance = 0.05;

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
  j.update({{"first_step_ms", r.first_step_ms},
            {"median_ms", r.median_ms},
            {"tokens_per_s", r.tokens_per_s},
            {"tflops", r.tflops},
            {"mfu", r.mfu},
            {"mfu_theoretical", r.mfu_theoretical},
            {"losses", r.losses},
            {"detail", r.detail},
            {"peak_bytes", r.peak_bytes ? json(*r.peak_bytes) : json(nullptr)}});
  if (r.step_ms.count > 0) j["step_ms"] = r.step_ms.to_json();
  return j;
}

// How the ladder is timed. Each rung builds its own model and optimizer and trains all its steps in a row
// (so do the Python peers, in a child process): rungs are not interleaved, which would hold every rung's
// model and AdamW state at once. That is too much memory for the ladders that matter: the default ladder,
// on the CPU too, is GPT-2 124M, whose weights, gradients and AdamW moments are about 2 GB per rung, so six
// eager rungs would hold 12 GB at once (and on a GPU those 12 GB sit beside the B=16, T=1024 step's
// activations); only --quick's tiny model would fit, and a second timing design for it alone would make the
// quick ladder measure otherwise than the real one. A rung's evidence is its measured steps (median and quartiles) and
// the machine's reading over the rung; a ratio of two of them is speedlabs::ratio_of_sequential (median over median,
// quartiles crossed), under the busier of the two readings.

// The tokens/s of @p r, from its measured steps, with the machine's reading: a rate must be positive.
speedlabs::Evidence rate_evidence(const RungResult& r) {
  speedlabs::Evidence evidence(speedlabs::rate_of(r.step_ms, static_cast<double>(r.shape.batch * r.shape.seq)),
                               r.contention,
                               speedlabs::LoadEffect::rate);  // CPU-bound steps: a load only lowers the rate
  evidence.bounds = {speedlabs::positive_finite("tokens/s of " + r.name, r.tokens_per_s)};
  return evidence;
}

// The MFU of every measured step of @p r (its useful FLOP/s over the measured peak of its format): its tokens/s per
// step scaled to its MFU; an MFU above the peak means the peak was measured wrong.
speedlabs::Evidence mfu_evidence(const RungResult& r) {
  speedlabs::Evidence evidence = rate_evidence(r);
  const double per_token_s = r.mfu / r.tokens_per_s;
  for (double* v :
       {&evidence.value.median, &evidence.value.q1, &evidence.value.q3, &evidence.value.min, &evidence.value.max}) {
    *v *= per_token_s;
  }
  evidence.bounds.push_back(
      {"MFU of " + r.name + " against the measured peak of its format", r.mfu, 0, 1 + kPeakTolerance});
  return evidence;
}

// tokens/s of @p faster over tokens/s of @p slower: slower's step times over faster's.
speedlabs::Evidence speedup_evidence(const RungResult& faster, const RungResult& slower) {
  speedlabs::Evidence evidence(speedlabs::ratio_of_sequential(slower.step_ms, faster.step_ms),
                               speedlabs::busier(faster.contention, slower.contention), speedlabs::LoadEffect::ratio);
  evidence.bounds = {speedlabs::positive_finite("tokens/s of " + faster.name, faster.tokens_per_s),
                     speedlabs::positive_finite("tokens/s of " + slower.name, slower.tokens_per_s)};
  return evidence;
}

// A GPU goal: a ratio against a threshold, judged only on a CUDA GPU (where the goals are set), by
// Report::decide from @p evidence (its value: the ratio's samples). Off a CUDA GPU it is not applicable, with
// the numbers and their evidence shown.
void goal(speedlabs::Report& report, const c10::Device& device, const std::string& id, const std::string& claim,
          const std::optional<speedlabs::Evidence>& evidence, json measured, double threshold,
          const std::string& missing) {
  const std::string expected = ">= " + fixed(threshold, 2) + " (a GPU goal, judged on a CUDA GPU)";
  if (!evidence) {
    report.not_applicable(id, claim, expected, missing, /*must_hold=*/false);
    return;
  }
  if (!device.is_cuda()) {
    speedlabs::Observation o{id,
                             claim,
                             measured,
                             expected,
                             speedlabs::Verdict::not_applicable,
                             false,
                             "the goals are set for a CUDA GPU; this run is on " + device.str()};
    if (std::isfinite(evidence->value.median)) o.evidence = evidence->to_json();
    report.add(o);
    return;
  }
  report.decide(
      id, claim, measured, expected, *evidence, [threshold](double v) { return v >= threshold; },
      /*must_hold=*/false);
}

}  // namespace

std::string mfu_text(double mfu) { return std::isnan(mfu) ? "n/a" : fixed(100 * mfu, 1) + "%"; }

// The ladder and the peers of one shape as a markdown table, then the ratios the GPU goals are about.
std::string shape_table(const LadderResult& ladder, const Shape& shape) {
  std::ostringstream out;
  const RungResult* fp32 = find(ladder.rungs, "fp32", shape);
  out << "### B=" << shape.batch << ", T=" << shape.seq << "\n\n"
      << "| step | ms/step (median) | first step ms | tokens/s | x C++ fp32 | TFLOP/s | MFU (measured / theoretical "
         "peak) | peak MiB | loss first -> "
         "last "
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
        << fixed(r.tflops, 3) << " | " << mfu_text(r.mfu) << " / " << mfu_text(r.mfu_theoretical) << " | "
        << (r.peak_bytes ? fixed(speedlabs::to_mib(static_cast<double>(*r.peak_bytes)), 0) : "n/a") << " | "
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

namespace {

// Each rung of one shape (its losses finite, its rate as evidence), then how their losses compare with fp32's.
// mfu_BxT: every rung's MFU against the measured and the theoretical peak of its format, decided on the top rung's
// steps (its tokens/s per step, scaled to its MFU).
void observe_mfu(const LadderResult& ladder, const Shape& shape, speedlabs::Report& report) {
  const std::string id = "mfu_" + shape.name();
  const std::string claim =
      "each rung's model FLOP utilisation against the measured matmul peak of its format and "
      "against the theoretical peak (CPU: cores x clock x FMA units x lanes x 2; GPU: datasheet)";
  const RungResult* top = top_rung(ladder.rungs, shape);
  if (!top) {
    report.not_applicable(id, claim, "two shares of a peak (reported)", "no rung ran at this shape", false);
    return;
  }
  json rungs = json::object(), peaks = json::object();
  bool under_theory = true;  // a share of the theoretical peak above 1: that peak is not one
  for (const auto& r : ladder.rungs) {
    if (!r.ran || r.shape.name() != shape.name()) continue;
    under_theory = under_theory && r.mfu_theoretical <= 1;
    rungs[r.name] = {{"format", speedlabs::to_string(rung_format(parse_rung(r.name)))},
                     {"mfu_measured_peak", r.mfu},
                     {"mfu_theoretical_peak", r.mfu_theoretical}};
  }
  for (const auto& [format, tflops] : ladder.peaks.measured_tflops) {
    const auto& theory = ladder.peaks.theoretical.at(format);
    peaks[speedlabs::to_string(format)] = {
        {"measured_tflops", tflops}, {"theoretical_tflops", theory.flops / 1e12}, {"theoretical", theory.what}};
  }
  report.decide(
      id, claim,
      {{"top_rung", top->name},
       {"mfu_measured_peak", top->mfu},
       {"mfu_theoretical_peak", top->mfu_theoretical},
       {"rungs", rungs},
       {"peaks", peaks}},
      "two shares of a peak (reported); no rung's share of the theoretical peak above 1", mfu_evidence(*top),
      [under_theory](double mfu) { return mfu > 0 && under_theory; }, false);
}

void observe_rungs(const LadderResult& ladder, const Shape& shape, speedlabs::Report& report) {
  const std::string suffix = "_" + shape.name();
  const RungResult* fp32 = find(ladder.rungs, "fp32", shape);
  double initial_gap = 0, track_gap = 0;
  json initial_gaps = json::object(), track_gaps = json::object();
  for (const auto& r : ladder.rungs) {
    if (r.shape.name() != shape.name()) continue;
    const std::string id = "rung_" + r.name + suffix;
    const std::string claim = "rung " + r.name + " trains at B=" + std::to_string(shape.batch) +
                              ", T=" + std::to_string(shape.seq) + " with every loss finite";
    if (!r.ran) {
      report.not_applicable(id, claim, "every loss finite", r.reason);
      continue;
    }
    json measured = to_json(r);
    if (fp32) {
      measured["speedup_vs_fp32"] = r.tokens_per_s / fp32->tokens_per_s;
      const auto band = speedup_evidence(r, *fp32).value;
      measured["speedup_q1"] = band.q1;
      measured["speedup_q3"] = band.q3;
    }
    // The verdict is the losses' (untimed); the rung's rate travels with its evidence (its steps' spread,
    // the machine's reading), which the table's spread column shows.
    auto& o = report.check(id, claim, measured, "every loss finite", all_finite(r.losses));
    o.evidence = rate_evidence(r).to_json();
    if (fp32 && &r != fp32) {
      const double step_zero = max_loss_gap(r, *fp32, true), every_step = max_loss_gap(r, *fp32);
      initial_gaps[r.name] = step_zero;
      track_gaps[r.name] = every_step;
      initial_gap = speedlabs::worst_gap(initial_gap, step_zero);
      track_gap = speedlabs::worst_gap(track_gap, every_step);
    }
  }
  if (fp32 && !initial_gaps.empty()) {
    report.check("initial_losses" + suffix, "every rung's step-0 loss is fp32's, up to rounding", initial_gaps,
                 "max |loss0 - fp32 loss0| <= " + fixed(kStepZeroAgreement, 2) + " nat",
                 initial_gap <= kStepZeroAgreement);
    report.check("losses_track_fp32" + suffix, "every rung's loss tracks fp32's at every step", track_gaps,
                 "max |loss - fp32 loss| <= " + fixed(kTrackTolerance, 2) + " nat", track_gap <= kTrackTolerance);
  } else {
    report.not_applicable("losses_track_fp32" + suffix, "every rung's loss tracks fp32's at every step",
                          "max |loss - fp32 loss| <= " + fixed(kTrackTolerance, 2) + " nat",
                          "needs the fp32 rung and at least one rung above it");
  }
}

// The Python peers of one shape: that they ran, the eager fp32 peer's parity, the torch.compile peers' tracking.
void observe_peers(const Config& config, const LadderResult& ladder, const Shape& shape,
                   const std::string& peer_failure, speedlabs::Report& report) {
  const std::string suffix = "_" + shape.name();
  const RungResult* fp32 = find(ladder.rungs, "fp32", shape);
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
    report.check("python_eager_vs_cpp_fp32" + suffix, parity_claim, gap, parity_expected, gap <= kPeerLossTolerance);
  } else {
    report.not_applicable("python_eager_vs_cpp_fp32" + suffix, parity_claim, parity_expected,
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

}  // namespace

void observe_shape(const Config& config, const LadderResult& ladder, const Shape& shape,
                   const std::string& peer_failure, speedlabs::Report& report) {
  observe_rungs(ladder, shape, report);
  observe_mfu(ladder, shape, report);
  observe_peers(config, ladder, shape, peer_failure, report);
}

void observe_goals(const LadderResult& ladder, const c10::Device& device, speedlabs::Report& report) {
  const Shape small{4, 128}, large{16, 1024};
  {
    std::optional<speedlabs::Evidence> worst;
    json ratios = json::object();
    for (const std::string mode : {"fp32", "tf32", "bf16"}) {
      const RungResult* cpp = find(ladder.rungs, mode, small);
      const RungResult* py = find(ladder.peers, "python_eager_" + mode, small);
      if (!cpp || !py) continue;
      const auto evidence = speedup_evidence(*cpp, *py);
      ratios[mode] = cpp->tokens_per_s / py->tokens_per_s;
      if (!worst || evidence.value.median < worst->value.median) worst = evidence;
    }
    goal(report, device, "goal_cpp_eager_vs_python_eager_4x128",
         "C++ eager tokens/s over Python eager tokens/s in each precision at B=4, T=128 (the smallest ratio)", worst,
         ratios, kGoalEagerVsPython, "needs the C++ rungs fp32..bf16 and their Python eager peers at 4x128");
  }
  auto top_ratio = [&](const Shape& shape,
                       const std::string& peer_name) -> std::pair<std::optional<speedlabs::Evidence>, json> {
    const RungResult* top = top_rung(ladder.rungs, shape);
    const RungResult* peer = find(ladder.peers, peer_name, shape);
    if (!top || !peer) return {std::nullopt, nullptr};
    const double ratio = top->tokens_per_s / peer->tokens_per_s;
    const auto evidence = speedup_evidence(*top, *peer);
    return {evidence, json{{"top_rung", top->name},
                           {"ratio", ratio},
                           {"ratio_q1", evidence.value.q1},
                           {"ratio_q3", evidence.value.q3}}};
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
  std::optional<speedlabs::Evidence> mfu;
  if (top) mfu = mfu_evidence(*top);
  goal(report, device, "goal_top_rung_mfu_16x1024",
       "the top rung's MFU at B=16, T=1024 (useful FLOP/s over the measured matmul rate of its format)", mfu,
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

}  // namespace lab06
