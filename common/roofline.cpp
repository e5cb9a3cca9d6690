#include "common/roofline.h"

#include <algorithm>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/device.h"
#include "common/errors.h"
#include "common/format.h"
#include "common/gpt.h"
#include "common/precision.h"
#include "common/table.h"

namespace speedlabs {

using nlohmann::json;

namespace {

constexpr double kFloatBytes = 4;
// FLOPs per element of the elementwise ops, counting each +, -, *, / and each exp, log, tanh, sqrt as one:
// GELU(tanh): x^3 (2), *0.044715, +x, *sqrt(2/pi), tanh, +1, *x, *0.5.
constexpr double kGeluFlops = 9;
// Layer norm: the mean (1), the variance (3), normalize (2), scale and shift (2).
constexpr double kLayerNormFlops = 8;
// Log-softmax: the max (1), subtract it (1), exp (1), the sum (1), subtract the log of the sum (1).
constexpr double kLogSoftmaxFlops = 5;
// AdamW per parameter: weight decay (1), first moment (3), second moment (4), denominator (3), update (3).
constexpr double kAdamWFlops = 14;
// AdamW reads the weight, gradient and both moments and writes the weight and both moments.
constexpr double kAdamWArrays = 7;

// Elementwise ops count as memory-bound when they sit left of the ridge and reach under this share of
// the matmul peak: far from the compute roof, so more FLOP/s cannot be what limits them.
constexpr double kFarBelowPeak = 0.25;
// A point may stray this far above its roof before the roofline counts as mismeasured: the roofs are the
// best of a few rounds, not the hardware's true maxima.
constexpr double kRoofTolerance = 0.15;

double flops_per_s(double flops, double ms) { return flops / (ms / 1e3); }

double gflops(double flops) { return flops / 1e9; }

// Every number of the roofline obeys the roofs it was measured under: no op's point above the roof at its
// intensity (a peak is the best rate this machine reached, so an op beating it means the roof was
// mismeasured); a rate is positive.
std::vector<Bound> roofline_bounds(const Roofline& roofline) {
  std::vector<Bound> bounds;
  for (const auto& p : roofline.points) {
    bounds.push_back({p.id + "'s share of the roof at its intensity",
                      p.achieved_flops() / attainable_flops(roofline.peaks, p.intensity()), 0.0, 1 + kRoofTolerance});
  }
  return bounds;
}

Evidence roof_evidence(const Roofline& roofline, RoofSide side) {
  Evidence e(roofline.timings.sides[side].summary(), roofline.timings.contention, LoadEffect::time);
  return e;
}

}  // namespace

namespace {

// The roofs' sides, in RoofSide order: a large square matmul in float32 and bfloat16, a copy and a triad of
// arrays far larger than the caches. Each captures its tensors (handles) by value.
std::vector<std::function<void()>> roof_sides(const torch::TensorOptions& options, int64_t matmul_size,
                                              int64_t stream_elements) {
  std::vector<torch::Tensor> mm;  // a, b, c for float32, then for bfloat16
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    mm.push_back(torch::randn({matmul_size, matmul_size}, options.dtype(dtype)));
    mm.push_back(torch::randn({matmul_size, matmul_size}, options.dtype(dtype)));
    mm.push_back(torch::empty({matmul_size, matmul_size}, options.dtype(dtype)));
  }
  auto sa = torch::zeros({stream_elements}, options);
  const auto sb = torch::rand({stream_elements}, options);
  const auto sc = torch::rand({stream_elements}, options);
  // mutable: the output tensors are written through (the handles share the storage).
  return {[mm]() mutable { at::mm_out(mm[2], mm[0], mm[1]); }, [mm]() mutable { at::mm_out(mm[5], mm[3], mm[4]); },
          [sa, sb]() mutable { sa.copy_(sb); }, [sa, sb, sc]() mutable { at::add_out(sa, sb, sc, 3.0); }};
}

// The step's main ops at the step's shapes, each a point of @p roofline and a side after the roofs.
void add_step_ops(const gpt::GPTConfig& model_config, int64_t batch, int64_t seq, const torch::TensorOptions& options,
                  const c10::Device& device, Roofline& roofline, std::vector<std::function<void()>>& sides) {
  const double rows = static_cast<double>(batch * seq);  // B*T positions
  const double c = static_cast<double>(model_config.n_embd);
  const double v = static_cast<double>(model_config.vocab_size);
  const auto add = [&](OpPoint point, std::function<void()> fn) {
    roofline.points.push_back(std::move(point));
    sides.push_back(std::move(fn));
  };
  const auto tag = [&](const std::string& op, double cols) {
    return op + " on (" + std::to_string(batch * seq) + ", " + std::to_string(static_cast<int64_t>(cols)) + ")";
  };
  const auto x = torch::randn({batch * seq, model_config.n_embd}, options);
  const auto w_fc = torch::randn({4 * model_config.n_embd, model_config.n_embd}, options);
  const auto b_fc = torch::randn({4 * model_config.n_embd}, options);
  add({"matmul_mlp", "linear (B*T, C) x (C, 4C), the MLP's c_fc", false, 2 * rows * c * 4 * c,
       kFloatBytes * (rows * c + 4 * c * c + 4 * c + rows * 4 * c)},
      [x, w_fc, b_fc] { torch::linear(x, w_fc, b_fc); });
  const auto wte = torch::randn({model_config.vocab_size, model_config.n_embd}, options);
  add({"matmul_lm_head", "(B*T, C) x (C, V), the logits", false, 2 * rows * c * v,
       kFloatBytes * (rows * c + v * c + rows * v)},
      [x, wte] { torch::matmul(x, wte.t()); });
  const auto hidden = torch::randn({batch * seq, 4 * model_config.n_embd}, options);
  add({"gelu", tag("GELU (tanh)", 4 * c), true, kGeluFlops * rows * 4 * c, 2 * kFloatBytes * rows * 4 * c},
      [hidden] { at::gelu(hidden, "tanh"); });
  const auto gamma = torch::ones({model_config.n_embd}, options);
  const auto beta = torch::zeros({model_config.n_embd}, options);
  add({"layer_norm", tag("layer norm", c), true, kLayerNormFlops * rows * c, 2 * kFloatBytes * rows * c},
      [x, gamma, beta, n_embd = model_config.n_embd] { torch::layer_norm(x, {n_embd}, gamma, beta); });
  const auto logits = torch::randn({batch * seq, model_config.vocab_size}, options);
  add({"softmax", tag("log-softmax of the logits", v), true, kLogSoftmaxFlops * rows * v, 2 * kFloatBytes * rows * v},
      [logits] { torch::log_softmax(logits, -1); });
  // One AdamW update of every parameter of the model, with made-up gradients (the update does not care).
  gpt::GPT model(model_config);
  model->to(device);
  double parameters = 0;
  for (auto& p : model->parameters()) {
    p.mutable_grad() = torch::randn_like(p) * 1e-3;
    parameters += static_cast<double>(p.numel());
  }
  auto optimizer = std::make_shared<torch::optim::AdamW>(gpt::make_adamw(model, 1e-4));
  add({"adamw", "AdamW update of all " + std::to_string(static_cast<int64_t>(parameters)) + " parameters", true,
       kAdamWFlops * parameters, kAdamWArrays * kFloatBytes * parameters},
      [optimizer] { optimizer->step(); });
}

}  // namespace

Roofline measure_roofline(const gpt::GPTConfig& model_config, int64_t batch, int64_t seq, const c10::Device& device,
                          int64_t matmul_size, int64_t stream_mib, const TimingOptions& timing) {
  torch::NoGradGuard no_grad;
  const auto options = torch::TensorOptions().device(device);
  const double matmul_flops = 2.0 * static_cast<double>(matmul_size) * matmul_size * matmul_size;
  const int64_t n = stream_mib * (1 << 20) / static_cast<int64_t>(kFloatBytes);
  const double array_bytes = static_cast<double>(n) * kFloatBytes;
  // The roofs first (kRoofSides of them), then the step's ops.
  std::vector<std::function<void()>> sides = roof_sides(options, matmul_size, n);
  Roofline roofline;
  add_step_ops(model_config, batch, seq, options, device, roofline, sides);

  // Every round times each roof and each op once, so an op and the roof it is held against saw the same
  // machine. A roof is a maximum: its best round. An op's rate is its median.
  roofline.timings = time_interleaved(sides, device, timing);
  const auto& t = roofline.timings.sides;
  roofline.peaks.fp32_flops = flops_per_s(matmul_flops, t[kFp32Matmul].min_ms);
  roofline.peaks.bf16_flops = flops_per_s(matmul_flops, t[kBf16Matmul].min_ms);
  roofline.peaks.copy_bytes = 2 * array_bytes / (t[kCopy].min_ms / 1e3);
  roofline.peaks.triad_bytes = 3 * array_bytes / (t[kTriad].min_ms / 1e3);
  for (size_t i = 0; i < roofline.points.size(); ++i) roofline.points[i].ms = t[kRoofSides + i].median_ms;
  roofline.matmul_flops = matmul_flops;
  return roofline;
}

Summary Roofline::elementwise_peak_share() const {
  return timings.per_round([&](const std::vector<double>& ms) {
    const double peak = flops_per_s(matmul_flops, ms[kFp32Matmul]);
    double largest = 0;
    for (size_t i = 0; i < points.size(); ++i) {
      if (points[i].elementwise) largest = std::max(largest, flops_per_s(points[i].flops, ms[kRoofSides + i]) / peak);
    }
    return largest;
  });
}

MatmulRate measure_matmul_rate(const c10::Device& device, PeakFormat format, int64_t n, const TimingOptions& timing) {
  if (n < 1) throw UsageError("the matmul size must be positive, not " + std::to_string(n));
  torch::NoGradGuard no_grad;
  const auto dtype = format == PeakFormat::bf16   ? torch::kBFloat16
                     : format == PeakFormat::fp16 ? torch::kHalf
                                                  : torch::kFloat;
  const MatmulPrecisionScope precision(format == PeakFormat::tf32 ? "high" : "highest");
  const auto options = torch::TensorOptions().device(device).dtype(dtype);
  const auto a = torch::randn({n, n}, options), b = torch::randn({n, n}, options);
  auto c = torch::empty({n, n}, options);
  MatmulRate rate;
  rate.time = time_ms([&] { at::mm_out(c, a, b); }, device, timing);
  rate.flops_per_call = 2.0 * static_cast<double>(n) * n * n;
  rate.flops = flops_per_s(rate.flops_per_call, rate.time.min_ms);
  rate.median_flops = flops_per_s(rate.flops_per_call, rate.time.median_ms);
  return rate;
}

double attainable_flops(const MeasuredPeaks& peaks, double intensity) {
  return std::min(peaks.fp32_flops, intensity * peaks.bandwidth());
}

// --- the roofline's table and observations
// ----------------------------------------------------------------------------------

void print_roofline(const MeasuredPeaks& peaks, const std::vector<OpPoint>& points) {
  std::cout << "peaks: fp32 matmul " << fixed(gflops(peaks.fp32_flops), 1) << " GFLOP/s, bf16 matmul "
            << fixed(gflops(peaks.bf16_flops), 1) << " GFLOP/s; copy " << fixed(peaks.copy_bytes / 1e9, 1)
            << " GB/s, triad " << fixed(peaks.triad_bytes / 1e9, 1) << " GB/s; ridge " << fixed(peaks.ridge(), 2)
            << " FLOP/byte\n";
  Table table;
  table.left("op", 16).right("FLOP/byte", 12).right("ms", 11, fixed_digits(3)).right("GFLOP/s", 12).right("GB/s", 10);
  table.right("% of roof", 12, fixed_digits(1, "%")).gap(2).left("bound", 0);
  for (const auto& p : points) {
    table.add_row({p.id, p.intensity(), p.ms, gflops(p.achieved_flops()), p.achieved_bytes() / 1e9,
                   100 * p.achieved_flops() / attainable_flops(peaks, p.intensity()),
                   p.intensity() < peaks.ridge() ? "memory" : "compute"});
  }
  table.print(std::cout);
}

void observe_roofline(const Roofline& roofline, Report& report) {
  const MeasuredPeaks& peaks = roofline.peaks;
  const auto positive = [](double ms) { return ms > 0; };
  report.decide("peak_matmul_flops", "the compute roof: FLOP/s of a large matmul, float32 and bfloat16, its best round",
                {{"fp32", peaks.fp32_flops}, {"bf16", peaks.bf16_flops}}, "> 0 (reported)",
                roof_evidence(roofline, kFp32Matmul), positive, false);
  report.decide("peak_bandwidth", "the memory roof: bytes/s of a large copy and of a triad (a = b + s*c), best round",
                {{"copy", peaks.copy_bytes}, {"triad", peaks.triad_bytes}, {"ridge_flop_per_byte", peaks.ridge()}},
                "> 0 (reported)", roof_evidence(roofline, kCopy), positive, false);
  json elementwise = json::object();
  bool left_of_ridge = true;
  const auto bounds = roofline_bounds(roofline);
  for (size_t i = 0; i < roofline.points.size(); ++i) {
    const auto& p = roofline.points[i];
    const bool memory_side = p.intensity() < peaks.ridge();
    const double of_peak = p.achieved_flops() / peaks.fp32_flops;
    Evidence evidence(roofline.timings.sides[kRoofSides + i].summary(), roofline.timings.contention, LoadEffect::time);
    evidence.bounds = {bounds[i]};
    report.decide("roofline_" + p.id, p.what + ": where it sits on the roofline",
                  {{"flop_per_byte", p.intensity()},
                   {"ms", p.ms},
                   {"gflop_per_s", gflops(p.achieved_flops())},
                   {"gb_per_s", p.achieved_bytes() / 1e9},
                   {"share_of_fp32_peak", of_peak},
                   {"share_of_roof", bounds[i].value},
                   {"share_of_bandwidth", p.achieved_bytes() / peaks.bandwidth()},
                   {"bound", memory_side ? "memory" : "compute"}},
                  "its measured rate, at most the roof (reported)", evidence, positive, false);
    if (!p.elementwise) continue;
    left_of_ridge = left_of_ridge && memory_side;
    elementwise[p.id] = {{"flop_per_byte", p.intensity()},
                         {"share_of_fp32_peak", of_peak},
                         {"share_of_bandwidth", p.achieved_bytes() / peaks.bandwidth()}};
  }
  // Decided per round: the largest share of that round's matmul rate any elementwise op reached, held
  // against every op's point staying under the roof.
  Evidence evidence(roofline.elementwise_peak_share(), roofline.timings.contention,
                    LoadEffect::ratio);  // an op's rate over the matmul's, both timed in the same round
  evidence.bounds = bounds;
  report.decide("elementwise_ops_are_memory_bound",
                "GELU, layer norm, softmax and the AdamW update do a few FLOPs per byte: they sit left of the ridge "
                "and reach a small share of the matmul peak, so memory traffic, not arithmetic, sets their time",
                elementwise,
                "each: intensity < ridge (" + fixed(peaks.ridge(), 2) + " FLOP/byte) and < " +
                    fixed(100 * kFarBelowPeak, 1) + "%" + " of the fp32 matmul rate of its round",
                evidence, [&](double largest_share) { return left_of_ridge && largest_share < kFarBelowPeak; });
}

}  // namespace speedlabs
