// Lab 05's parity with Python PyTorch: the GPT of common/gpt and the reference train_step against the same
// model written in Python (reference/gpt_reference.py), run with SPEEDLABS_PYTHON.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "common/build_paths.h"
#include "common/gpt.h"
#include "common/precision.h"
#include "common/process.h"
#include "labs/05_gpt2/exercise.h"

namespace {

namespace gpt = speedlabs::gpt;
using speedlabs::Precision;

// The parity test: C++ writes the weights, a batch and its results; Python PyTorch recomputes and compares.
TEST(Lab05Parity, TrainStepMatchesThePythonReference) {
  const std::string python = speedlabs::configured_python();
  if (python.empty()) GTEST_SKIP() << "SPEEDLABS_PYTHON is not set (configure with -DSPEEDLABS_PYTHON=...)";
  const auto config = gpt::GPTConfig::tiny();
  torch::manual_seed(4);
  gpt::GPT model(config);  // the default, fused attention: an independent check of the explicit one in Python
  const auto x = torch::randint(config.vocab_size, {2, 32}, torch::kLong);
  const auto y = torch::randint(config.vocab_size, {2, 32}, torch::kLong);

  gpt::NamedTensors state{
      {"config", torch::tensor({config.block_size, config.vocab_size, config.n_layer, config.n_head, config.n_embd})},
      {"adamw", torch::tensor({1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f})},
      {"x", x},
      {"y", y}};
  for (const auto& p : model->named_parameters()) state.emplace_back("param/" + p.key(), p.value().detach().clone());
  const auto out = model->forward(x, y);
  out.loss.backward();
  state.emplace_back("cpp/logits", out.logits.detach());
  state.emplace_back("cpp/loss", out.loss.detach());
  for (const auto& p : model->named_parameters()) state.emplace_back("cpp/grad/" + p.key(), p.value().grad().clone());
  model->zero_grad();

  // Same hyper-parameters as the "adamw" entry, rounded to float32 as Python will read them.
  auto optimizer = torch::optim::AdamW(model->parameters(), torch::optim::AdamWOptions(double(1e-3f))
                                                                .betas({double(0.9f), double(0.999f)})
                                                                .eps(double(1e-8f))
                                                                .weight_decay(double(0.01f)));
  std::vector<float> losses;
  for (int step = 0; step < 10; ++step) {
    losses.push_back(lab05::train_step(model, optimizer, x, y, Precision::fp32).item<float>());
  }
  EXPECT_LT(losses.back(), losses.front()) << "the same batch ten times must be memorised: the loss must fall";
  state.emplace_back("cpp/adamw_losses", torch::tensor(losses));
  const std::string path = (std::filesystem::path(::testing::TempDir()) / "lab05_parity.bin").string();
  gpt::write_tensor_file(path, state);

  speedlabs::ProcessOptions options;
  options.timeout_s = 300;
  const auto result = speedlabs::run_process(
      {python, speedlabs::source_dir() + "/reference/gpt_reference.py", "--check", path}, options);
  std::cout << result.output;
  EXPECT_TRUE(result.ok()) << "reference/gpt_reference.py: " << result.describe() << "\n" << result.output;
}

}  // namespace
