#include "task.h"

#include <cmath>
#include <map>

#include "common/errors.h"
#include "common/gpt.h"

namespace lab13 {

namespace gpt = speedlabs::gpt;

Split split_tokens(const std::vector<int32_t>& tokens) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n < 4 * (kValidationTokens + 1)) {
    throw speedlabs::UsageError("the speedrun needs tiny shakespeare's tokens (" + std::to_string(n) +
                                " given, fewer than four times its validation split of " +
                                std::to_string(kValidationTokens + 1) + ")");
  }
  Split split;
  split.validation_begin = n - (kValidationTokens + 1);
  split.validation_end = n;
  split.train_begin = 0;
  split.train_end = split.validation_begin;
  split.train = std::make_shared<const std::vector<int32_t>>(tokens.begin(), tokens.begin() + split.train_end);
  split.validation.assign(tokens.begin() + split.validation_begin, tokens.end());
  return split;
}

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw speedlabs::UsageError("the speedrun's model limits: " + what);
}

}  // namespace

void require_within_limits(const gpt::GPTConfig& m) {
  require(m.n_layer >= 1 && m.n_layer <= 6, "1 to 6 layers (" + std::to_string(m.n_layer) + " asked)");
  require(m.n_embd >= 32 && m.n_embd <= 384, "a width of 32 to 384 (" + std::to_string(m.n_embd) + " asked)");
  require(m.n_head >= 1 && m.n_embd % m.n_head == 0, "the width must be a multiple of the heads (" +
                                                         std::to_string(m.n_embd) + " and " + std::to_string(m.n_head) +
                                                         " asked)");
  const int64_t head_size = m.n_embd / std::max<int64_t>(m.n_head, 1);
  require(head_size >= 8 && head_size <= 64, "heads of 8 to 64 (" + std::to_string(head_size) + " asked)");
  require(m.block_size >= kEvalContext && m.block_size <= 256,
          "a context of " + std::to_string(kEvalContext) + " to 256 (" + std::to_string(m.block_size) + " asked)");
  require(m.vocab_size == 50257, "GPT-2's 50,257 tokens");
}

double evaluate(const gpt::GPTConfig& model, const gpt::NamedTensors& weights, const std::vector<int32_t>& validation,
                std::string& problem) {
  torch::NoGradGuard no_grad;
  gpt::GPT evaluator(model);
  std::map<std::string, torch::Tensor> params;
  for (const auto& p : evaluator->named_parameters()) params.emplace(p.key(), p.value());
  size_t loaded = 0;
  for (const auto& [name, tensor] : weights) {
    const auto it = params.find(name);
    if (it == params.end()) throw speedlabs::RuntimeFailure("the trainer's weights() has an unknown '" + name + "'");
    if (!tensor.defined() || tensor.sizes() != it->second.sizes()) {
      throw speedlabs::RuntimeFailure("the trainer's weight '" + name + "' has the wrong shape");
    }
    const torch::Tensor value = tensor.detach().to(torch::kCPU, torch::kFloat);
    if (!torch::isfinite(value).all().item<bool>()) {
      problem = "weight '" + name + "' is not finite";
      return std::nan("");
    }
    it->second.copy_(value);
    ++loaded;
  }
  if (loaded != params.size()) {
    throw speedlabs::RuntimeFailure("the trainer's weights() gave " + std::to_string(loaded) + " of the model's " +
                                    std::to_string(params.size()) + " weights");
  }
  evaluator->eval();
  const int64_t windows = (static_cast<int64_t>(validation.size()) - 1) / kEvalContext;
  const auto ids = torch::tensor(validation, torch::kInt64);
  constexpr int64_t kWindowsPerBatch = 16;  // 1,024 tokens: 200 MB of float32 logits at a time
  double sum = 0;
  for (int64_t w = 0; w < windows; w += kWindowsPerBatch) {
    const int64_t n = std::min(kWindowsPerBatch, windows - w);
    const auto x = ids.narrow(0, w * kEvalContext, n * kEvalContext).view({n, kEvalContext});
    const auto y = ids.narrow(0, w * kEvalContext + 1, n * kEvalContext).view({n, kEvalContext});
    sum += evaluator->forward(x, y).loss.item<double>() * static_cast<double>(n);
  }
  return sum / static_cast<double>(windows);
}

}  // namespace lab13
