// The speedrun's baseline trainer (baseline.h): plain float32 AdamW at a constant learning rate, attention written
// out. The same recipe as the stub a student starts from; it is the lab's own and never changes.
#include <cmath>
#include <limits>

#include "baseline.h"
#include "common/gpt.h"
#include "datasets/data_loader.h"

namespace lab13 {

namespace gpt = speedlabs::gpt;

torch::Tensor written_out_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t T = q.size(-2);
  auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  const auto future = torch::ones({T, T}, q.options().dtype(torch::kBool)).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v);
}

gpt::NamedTensors weights_of(const gpt::GPT& model) {
  gpt::NamedTensors named;
  for (const auto& p : model->named_parameters()) named.emplace_back(p.key(), p.value().detach());
  return named;
}

namespace {

class BaselineTrainer : public Trainer {
 public:
  void init(const TrainerConfig& config) override {
    torch::manual_seed(config.seed);
    model_ = std::make_unique<gpt::GPT>(config.model, written_out_attention);
    optimizer_ = std::make_unique<torch::optim::AdamW>(gpt::make_adamw(*model_, config.lr));
    loader_ = std::make_unique<datasets::DataLoaderLite>(*config.train_tokens, config.batch, config.seq);
  }

  void step() override {
    const datasets::Batch batch = loader_->next_batch();
    const torch::Tensor loss = (*model_)->forward(batch.x, batch.y).loss;
    loss.backward();
    optimizer_->step();
    optimizer_->zero_grad();
  }

  gpt::NamedTensors weights() override { return weights_of(*model_); }

 private:
  std::unique_ptr<gpt::GPT> model_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  std::unique_ptr<datasets::DataLoaderLite> loader_;
};

}  // namespace

std::unique_ptr<Trainer> make_baseline_trainer() { return std::make_unique<BaselineTrainer>(); }

}  // namespace lab13
