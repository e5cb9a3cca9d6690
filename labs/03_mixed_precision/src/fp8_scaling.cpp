#include "fp8_scaling.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <iostream>
#include <limits>

#include "common/table.h"
#include "model.h"

namespace lab03 {

double fp8_max(c10::ScalarType dtype) {
  // Decoded from the 256 patterns: casting a huge float would saturate or overflow, by format and library.
  const auto values = torch::arange(256, torch::kInt32).to(torch::kUInt8).view(dtype).to(torch::kFloat);
  const auto finite = values.masked_select(torch::isfinite(values));
  return finite.abs().max().item<double>();
}

double per_tensor_scale(double amax, c10::ScalarType dtype) { return amax > 0 ? fp8_max(dtype) / amax : 1.0; }

Fp8CastLoss cast_through_fp8(const torch::Tensor& x, double scale, c10::ScalarType dtype) {
  const double max = fp8_max(dtype);
  int exponent = 0;
  std::frexp(max, &exponent);  // max = 0.f * 2^exponent: its binade's step is 2^(exponent - 1 - mantissa bits)
  const int mantissa_bits = dtype == at::kFloat8_e4m3fn ? 3 : 2;
  const double rounding_range = max + std::ldexp(1.0, exponent - 1 - mantissa_bits) / 2;
  const auto scaled = x.to(torch::kFloat) * scale;
  const auto back = scaled.to(dtype).to(torch::kFloat) / scale;
  const double n = static_cast<double>(std::max<int64_t>(1, x.numel()));
  const auto nonzero = x != 0;
  Fp8CastLoss loss;
  loss.saturated = (scaled.abs() > rounding_range).sum().item<double>() / n;
  loss.flushed =
      torch::logical_and(nonzero, back == 0).sum().item<double>() / std::max(1.0, nonzero.sum().item<double>());
  loss.relative_error = (x - back).abs().sum().item<double>() / std::max(1e-30, x.abs().sum().item<double>());
  return loss;
}

namespace {

void accumulate(Fp8CastLoss& total, const Fp8CastLoss& step) {
  total.saturated += step.saturated;
  total.flushed += step.flushed;
  total.relative_error += step.relative_error;
}

void average(Fp8CastLoss& total, int steps) {
  total.saturated /= std::max(1, steps);
  total.flushed /= std::max(1, steps);
  total.relative_error /= std::max(1, steps);
}

nlohmann::json loss_json(const Fp8CastLoss& l) {
  return {{"saturated", l.saturated}, {"flushed", l.flushed}, {"relative_error", l.relative_error}};
}

}  // namespace

Fp8ScalingRun fp8_scaling_over_training(const Config& config) {
  const Data data = make_data(config);
  auto model = make_model(config);
  auto first_layer = model->ptr(0)->as<torch::nn::Linear>();
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(kLearningRate));
  const auto dtype = at::kFloat8_e4m3fn;
  std::deque<double> history;  // the amax of the previous kAmaxHistory steps
  Fp8ScalingRun run;
  for (int step = 0; step < config.steps; ++step) {
    torch::Tensor activations;
    {
      torch::NoGradGuard no_grad;
      activations = first_layer->forward(data.x).cpu();
    }
    const double amax = activations.abs().max().item<double>();
    if (!history.empty()) {
      const auto current = cast_through_fp8(activations, per_tensor_scale(amax, dtype), dtype);
      const double delayed_amax = *std::max_element(history.begin(), history.end());
      const auto delayed = cast_through_fp8(activations, per_tensor_scale(delayed_amax, dtype), dtype);
      accumulate(run.raw, cast_through_fp8(activations, 1.0, dtype));
      accumulate(run.current, current);
      accumulate(run.delayed, delayed);
      run.current_saturated_steps += current.saturated > 0;
      run.delayed_saturated_steps += delayed.saturated > 0;
      ++run.steps;
    }
    history.push_back(amax);
    if (static_cast<int>(history.size()) > kAmaxHistory) history.pop_front();
    optimizer.zero_grad();
    torch::mse_loss(model->forward(data.x), data.y).backward();
    optimizer.step();
  }
  for (auto* way : {&run.raw, &run.current, &run.delayed}) average(*way, run.steps);
  return run;
}

void observe_fp8_scaling(const Config& config, speedlabs::Report& report) {
  const auto run = fp8_scaling_over_training(config);
  std::cout << "\nThe first layer's activations cast to e4m3fn (max 448) at each of " << run.steps
            << " float32 training steps, averaged:\n";
  speedlabs::Table table;
  table.left("scale", 44).right("saturated", 12, speedlabs::scientific_digits(2));
  table.right("flushed to 0", 14, speedlabs::scientific_digits(2))
      .right("relative error", 16, speedlabs::scientific_digits(2));
  table.add_row({"none (raw cast)", run.raw.saturated, run.raw.flushed, run.raw.relative_error});
  table.add_row(
      {"current: 448 / this step's amax", run.current.saturated, run.current.flushed, run.current.relative_error});
  table.add_row({"delayed: 448 / max amax of " + std::to_string(kAmaxHistory) + " earlier steps", run.delayed.saturated,
                 run.delayed.flushed, run.delayed.relative_error});
  table.print(std::cout);

  report.check("fp8_current_scaling_keeps_range",
               "scaled by 448 / its own amax, a tensor's largest value lands on e4m3fn's largest, so nothing "
               "saturates, and small values move up out of the subnormals: no more of them flush to 0 than raw",
               {{"raw", loss_json(run.raw)},
                {"current", loss_json(run.current)},
                {"current_saturated_steps", run.current_saturated_steps},
                {"steps", run.steps}},
               "current: saturated == 0 at every step, flushed <= raw's",
               run.steps > 0 && run.current_saturated_steps == 0 && run.current.flushed <= run.raw.flushed);
  report.check("fp8_delayed_scaling_shares",
               "a delayed scale comes from the amax of earlier steps (the current one is known only after the "
               "tensor is computed): where a tensor outgrows its history, its largest values saturate",
               {{"delayed", loss_json(run.delayed)},
                {"delayed_saturated_steps", run.delayed_saturated_steps},
                {"steps", run.steps},
                {"history", kAmaxHistory}},
               "reported: the shares saturated and flushed", true, false);
}

}  // namespace lab03
