#include "task.h"

#include <array>
#include <cmath>
#include <map>

#include "common/errors.h"
#include "common/files.h"
#include "common/gpt.h"
#include "datasets/data_files.h"

namespace lab13 {

namespace gpt = speedlabs::gpt;

std::vector<int32_t> load_characters(const std::filesystem::path& data_dir) {
  const std::string text = speedlabs::read_file(datasets::require_file(data_dir, datasets::kShakespearePath).string());
  std::array<int32_t, 256> rank{};
  rank.fill(-1);
  for (unsigned char byte : text) rank[byte] = 0;
  int32_t symbols = 0;
  for (int32_t& r : rank) r = r == 0 ? symbols++ : -1;
  if (symbols != kVocabulary) {
    throw speedlabs::RuntimeFailure("tiny shakespeare holds " + std::to_string(symbols) + " distinct characters, not " +
                                    std::to_string(kVocabulary) + ": not the file the speedrun is defined on");
  }
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = rank[static_cast<unsigned char>(text[i])];
  return ids;
}

Split split_tokens(const std::vector<int32_t>& ids) {
  const auto n = static_cast<int64_t>(ids.size());
  const auto boundary = static_cast<int64_t>(static_cast<double>(n) * kTrainShare);  // Python's int(n * 0.9)
  if (n - boundary < kEvalContext + 1) {
    throw speedlabs::UsageError("the speedrun needs tiny shakespeare (" + std::to_string(n) +
                                " characters given: its validation split would not hold one window)");
  }
  Split split;
  split.validation_begin = boundary;
  split.validation_end = n;
  split.train_begin = 0;
  split.train_end = boundary;
  split.train = std::make_shared<const std::vector<int32_t>>(ids.begin(), ids.begin() + boundary);
  split.validation.assign(ids.begin() + boundary, ids.end());
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
  require(m.vocab_size == kVocabulary,
          "the task's " + std::to_string(kVocabulary) + " characters (" + std::to_string(m.vocab_size) + " asked)");
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
  constexpr int64_t kWindowsPerBatch = 256;  // 16,384 characters: 4 MB of float32 logits at a time
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
