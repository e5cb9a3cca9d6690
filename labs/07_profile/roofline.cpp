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

double median_ms(const std::function<void()>& fn, const c10::Device& device, const speedlabs::TimingOptions& timing) {
  return speedlabs::time_ms(fn, device, timing).median_ms;
}

}  // namespace

Peaks measure_peaks(const c10::Device& device, int64_t matmul_size, int64_t stream_mib,
                    const speedlabs::TimingOptions& timing) {
  torch::NoGradGuard no_grad;
  Peaks peaks;
  const auto options = torch::TensorOptions().device(device);
  const double matmul_flops = 2.0 * static_cast<double>(matmul_size) * matmul_size * matmul_size;
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const auto a = torch::randn({matmul_size, matmul_size}, options.dtype(dtype));
    const auto b = torch::randn({matmul_size, matmul_size}, options.dtype(dtype));
    auto c = torch::empty({matmul_size, matmul_size}, options.dtype(dtype));
    const double ms = median_ms([&] { at::mm_out(c, a, b); }, device, timing);
    (dtype == torch::kFloat ? peaks.fp32_flops : peaks.bf16_flops) = flops_per_s(matmul_flops, ms);
  }
  const int64_t n = stream_mib * (1 << 20) / static_cast<int64_t>(kFloatBytes);
  auto a = torch::zeros({n}, options);
  const auto b = torch::rand({n}, options);
  const auto c = torch::rand({n}, options);
  const double array_bytes = static_cast<double>(n) * kFloatBytes;
  peaks.copy_bytes = 2 * array_bytes / (median_ms([&] { a.copy_(b); }, device, timing) / 1e3);
  peaks.triad_bytes = 3 * array_bytes / (median_ms([&] { at::add_out(a, b, c, 3.0); }, device, timing) / 1e3);
  return peaks;
}

std::vector<OpPoint> measure_step_ops(const speedlabs::gpt::GPTConfig& model_config, int64_t batch, int64_t seq,
                                      const c10::Device& device, const speedlabs::TimingOptions& timing) {
  const auto options = torch::TensorOptions().device(device);
  const double rows = static_cast<double>(batch * seq);  // B*T positions
  const double c = static_cast<double>(model_config.n_embd);
  const double v = static_cast<double>(model_config.vocab_size);
  std::vector<OpPoint> points;
  const auto add = [&](OpPoint point, const std::function<void()>& fn) {
    point.ms = median_ms(fn, device, timing);
    points.push_back(std::move(point));
  };
  const auto tag = [&](const std::string& op, double cols) {
    return op + " on (" + std::to_string(batch * seq) + ", " + std::to_string(static_cast<int64_t>(cols)) + ")";
  };

  torch::NoGradGuard no_grad;
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
  return points;
}

double attainable_flops(const Peaks& peaks, double intensity) {
  return std::min(peaks.fp32_flops, intensity * peaks.bandwidth());
}

}  // namespace lab07
