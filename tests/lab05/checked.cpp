// Lab 05, checked outside the student's process (tests/support/checked.h): causal attention written out, on
// shapes the grader's seed draws; and training steps of a small GPT in each precision mode, on models,
// batches and loss scales it draws.
#include <ATen/autocast_mode.h>

#include <array>
#include <string>
#include <vector>

#include "exercise.h"
#include "tests/support/checked.h"

namespace speedlabs::checked {

namespace {

namespace gpt = speedlabs::gpt;

// The float32 matmul precisions, in the order their index is an output.
constexpr std::array<const char*, 3> kMatmulPrecisions{"highest", "high", "medium"};

int64_t matmul_precision_index() {
  const std::string now = speedlabs::current_matmul_precision();
  for (size_t i = 0; i < kMatmulPrecisions.size(); ++i) {
    if (now == kMatmulPrecisions[i]) return static_cast<int64_t>(i);
  }
  return -1;
}

// 1 to 3 steps of a GPT of 1-2 layers, 1-2 heads of 4-8, a vocabulary of 16-96 and 2-3 sequences of 4-16 tokens
// (libtorch's fused attention: only train_step is the student's), in every mode from the same weights: fp32,
// tf32, bf16, and fp16 through lab 03's reference GradScaler, whose first scale (2^8 to 2^40) may overflow
// float16's gradients. SGD at a power-of-two rate, so a parameter's change is the gradient itself.
Outputs train_steps(at::Generator& generator) {
  gpt::GPTConfig config;
  config.n_layer = draw_int(generator, 1, 2);
  config.n_head = draw_int(generator, 1, 2);
  config.n_embd = config.n_head * draw_int(generator, 4, 8);
  config.vocab_size = draw_int(generator, 16, 96);
  config.block_size = 16;
  const int64_t batch = draw_int(generator, 2, 3), seq = draw_int(generator, 4, 16), steps = draw_int(generator, 1, 3);
  const auto model_seed = static_cast<uint64_t>(draw_int(generator, 0, 1 << 30));
  const double rate = std::ldexp(1.0, -static_cast<int>(draw_int(generator, 2, 6)));
  lab03::GradScalerOptions scaler_options;
  scaler_options.init_scale = std::ldexp(1.0, static_cast<int>(draw_int(generator, 8, 40)));
  scaler_options.growth_interval = draw_int(generator, 1, 3);
  std::vector<torch::Tensor> xs, ys;
  for (int64_t step = 0; step < steps; ++step) {
    xs.push_back(torch::randint(config.vocab_size, {batch, seq}, generator, torch::kLong));
    ys.push_back(torch::randint(config.vocab_size, {batch, seq}, generator, torch::kLong));
  }
  Outputs outputs;
  for (const Precision mode : {Precision::fp32, Precision::tf32, Precision::bf16, Precision::fp16}) {
    torch::manual_seed(model_seed);  // the same initial weights in every mode
    gpt::GPT model(config);
    const auto parameters = model->parameters();
    torch::optim::SGD optimizer(parameters, torch::optim::SGDOptions(rate));
    lab03::GradScaler scaler(scaler_options);
    std::vector<float> losses;
    std::vector<double> scales;
    std::vector<int64_t> precisions_after, autocast_after;
    double gradients_left = 0;  // |gradient| summed over every parameter after each step: zeroed, so 0
    for (int64_t step = 0; step < steps; ++step) {
      const auto loss =
          lab05::train_step(model, optimizer, xs[step], ys[step], mode, mode == Precision::fp16 ? &scaler : nullptr);
      losses.push_back(loss.item<float>());
      scales.push_back(scaler.get_scale());
      precisions_after.push_back(matmul_precision_index());
      autocast_after.push_back(at::autocast::is_autocast_enabled(c10::kCPU) ? 1 : 0);
      for (const auto& p : parameters) {
        if (p.grad().defined()) gradients_left += p.grad().abs().sum().item<double>();
      }
    }
    const std::string name = speedlabs::to_string(mode) + "_";
    outputs.emplace_back(name + "losses", torch::tensor(losses));
    outputs.emplace_back(name + "scales", torch::tensor(scales, torch::kFloat64));
    outputs.emplace_back(name + "matmul_precision_after", torch::tensor(precisions_after, torch::kLong));
    outputs.emplace_back(name + "autocast_on_after", torch::tensor(autocast_after, torch::kLong));
    outputs.emplace_back(name + "gradients_left", torch::tensor(gradients_left, torch::kFloat64));
    outputs.emplace_back(name + "parameters", joined(parameters));
  }
  return outputs;
}

}  // namespace

std::vector<Exercise> exercises() {
  return {
      {"causal_attention",
       [](at::Generator& generator) {
         const auto qkv = draw_attention_inputs(generator, 4);
         return Outputs{{"out", lab05::causal_attention(qkv[0], qkv[1], qkv[2])}};
       },
       // Two float32 computations in different orders, each about 1e-6 relative from the exact result; outputs
       // average values of size ~1, so 1e-6 absolute beside 2e-5 relative covers those near 0. A missing scale
       // or a mask off by one errs by 1e-2 or more.
       Tolerance{2e-5, 1e-6}},
      // Both processes run the same model code and libtorch kernels on the same machine: the same calls give
      // the same bits. The tolerance leaves an equivalent order of float32 arithmetic a few ulps (1e-5 relative
      // of a loss or a weight). A forward outside autocast (bf16, fp16) moves the loss by 1e-3 relative or
      // more; a scale never updated, a precision not restored or gradients not zeroed are exact outputs.
      {"train_step", train_steps, Tolerance{1e-5, 1e-7}},
  };
}

}  // namespace speedlabs::checked
