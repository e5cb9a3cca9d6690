#include "roofline.h"

#include <algorithm>

#include "common/device.h"

namespace lab07 {

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

double flops_per_s(double flops, double ms) { return flops / (ms / 1e3); }

}  // namespace

Roofline measure_roofline(const speedlabs::gpt::GPTConfig& model_config, int64_t batch, int64_t seq,
                          const c10::Device& device, int64_t matmul_size, int64_t stream_mib,
                          const speedlabs::TimingOptions& timing) {
  torch::NoGradGuard no_grad;
  const auto options = torch::TensorOptions().device(device);
  std::vector<std::function<void()>> sides;  // the roofs first (kRoofSides of them), then the step's ops

  // The roofs: a large square matmul in float32 and bfloat16, a copy and a triad of arrays far larger than
  // the caches.
  const double matmul_flops = 2.0 * static_cast<double>(matmul_size) * matmul_size * matmul_size;
  std::vector<torch::Tensor> mm;  // a, b, c for float32, then for bfloat16
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    mm.push_back(torch::randn({matmul_size, matmul_size}, options.dtype(dtype)));
    mm.push_back(torch::randn({matmul_size, matmul_size}, options.dtype(dtype)));
    mm.push_back(torch::empty({matmul_size, matmul_size}, options.dtype(dtype)));
  }
  sides.push_back([&] { at::mm_out(mm[2], mm[0], mm[1]); });
  sides.push_back([&] { at::mm_out(mm[5], mm[3], mm[4]); });
  const int64_t n = stream_mib * (1 << 20) / static_cast<int64_t>(kFloatBytes);
  auto sa = torch::zeros({n}, options);
  const auto sb = torch::rand({n}, options);
  const auto sc = torch::rand({n}, options);
  const double array_bytes = static_cast<double>(n) * kFloatBytes;
  sides.push_back([&] { sa.copy_(sb); });
  sides.push_back([&] { at::add_out(sa, sb, sc, 3.0); });

  // The step's main ops at the step's shapes.
  const double rows = static_cast<double>(batch * seq);  // B*T positions
  const double c = static_cast<double>(model_config.n_embd);
  const double v = static_cast<double>(model_config.vocab_size);
  Roofline roofline;
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
      [&] { torch::linear(x, w_fc, b_fc); });
  const auto wte = torch::randn({model_config.vocab_size, model_config.n_embd}, options);
  add({"matmul_lm_head", "(B*T, C) x (C, V), the logits", false, 2 * rows * c * v,
       kFloatBytes * (rows * c + v * c + rows * v)},
      [&] { torch::matmul(x, wte.t()); });
  const auto hidden = torch::randn({batch * seq, 4 * model_config.n_embd}, options);
  add({"gelu", tag("GELU (tanh)", 4 * c), true, kGeluFlops * rows * 4 * c, 2 * kFloatBytes * rows * 4 * c},
      [&] { at::gelu(hidden, "tanh"); });
  const auto gamma = torch::ones({model_config.n_embd}, options);
  const auto beta = torch::zeros({model_config.n_embd}, options);
  add({"layer_norm", tag("layer norm", c), true, kLayerNormFlops * rows * c, 2 * kFloatBytes * rows * c},
      [&] { torch::layer_norm(x, {model_config.n_embd}, gamma, beta); });
  const auto logits = torch::randn({batch * seq, model_config.vocab_size}, options);
  add({"softmax", tag("log-softmax of the logits", v), true, kLogSoftmaxFlops * rows * v, 2 * kFloatBytes * rows * v},
      [&] { torch::log_softmax(logits, -1); });
  // One AdamW update of every parameter of the model, with made-up gradients (the update does not care).
  speedlabs::gpt::GPT model(model_config);
  model->to(device);
  double parameters = 0;
  for (auto& p : model->parameters()) {
    p.mutable_grad() = torch::randn_like(p) * 1e-3;
    parameters += static_cast<double>(p.numel());
  }
  auto optimizer = speedlabs::gpt::make_adamw(model, 1e-4);
  add({"adamw", "AdamW update of all " + std::to_string(static_cast<int64_t>(parameters)) + " parameters", true,
       kAdamWFlops * parameters, kAdamWArrays * kFloatBytes * parameters},
      [&] { optimizer.step(); });

  // Every round times each roof and each op once, so an op and the roof it is held against saw the same
  // machine. A roof is a maximum: its best round. An op's rate is its median.
  roofline.timings = speedlabs::time_interleaved(sides, device, timing);
  const auto& t = roofline.timings.sides;
  roofline.peaks.fp32_flops = flops_per_s(matmul_flops, t[kFp32Matmul].min_ms);
  roofline.peaks.bf16_flops = flops_per_s(matmul_flops, t[kBf16Matmul].min_ms);
  roofline.peaks.copy_bytes = 2 * array_bytes / (t[kCopy].min_ms / 1e3);
  roofline.peaks.triad_bytes = 3 * array_bytes / (t[kTriad].min_ms / 1e3);
  for (size_t i = 0; i < roofline.points.size(); ++i) roofline.points[i].ms = t[kRoofSides + i].median_ms;
  roofline.matmul_flops = matmul_flops;
  return roofline;
}

speedlabs::Summary Roofline::elementwise_peak_share() const {
  return timings.per_round([&](const std::vector<double>& ms) {
    const double peak = flops_per_s(matmul_flops, ms[kFp32Matmul]);
    double largest = 0;
    for (size_t i = 0; i < points.size(); ++i) {
      if (points[i].elementwise) largest = std::max(largest, flops_per_s(points[i].flops, ms[kRoofSides + i]) / peak);
    }
    return largest;
  });
}

double attainable_flops(const Peaks& peaks, double intensity) {
  return std::min(peaks.fp32_flops, intensity * peaks.bandwidth());
}

}  // namespace lab07
