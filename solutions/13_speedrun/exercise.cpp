// Lab 13 reference solution: the course's fastest CPU trainer for the speedrun. Each technique can be turned
// off by name (TrainerConfig::disabled) for the lab's ablation. A smaller batch early and a larger learning rate
// early, which win the quick race, each cost steps on the full one: they are left out (README.md).
#include "exercise.h"

#include <sstream>
#include <string>

#include "baseline.h"
#include "common/autocast_guard.h"
#include "common/gpt.h"
#include "common/peaks.h"
#include "datasets/data_loader.h"
#include "stream_vocab.h"

namespace lab13 {

namespace gpt = speedlabs::gpt;

namespace {

// The tied embedding's name among the GPT's parameters.
constexpr const char* kEmbeddingName = "transformer.wte.weight";

// labs 03 and 05: bf16 pays where the CPU multiplies bf16 pairs in hardware. On a Xeon without avx512_bf16
// or AMX, the step with bf16 took twice as long as the float32 one (README.md, the full race there).
bool cpu_multiplies_bf16() {
  std::istringstream flags(speedlabs::describe_this_cpu().flags);
  for (std::string flag; flags >> flag;) {
    if (flag == "avx512_bf16" || flag == "amx_bf16") return true;
  }
  return false;
}

class FastTrainer : public Trainer {
 public:
  void init(const TrainerConfig& config) override {
    config_ = config;
    on_ = [this](const char* name) { return config_.disabled.count(name) == 0; };
    torch::manual_seed(config.seed);
    gpt::GPTConfig model = config.model;
    if (on_("stream_vocab")) {
      vocabulary_ = std::make_unique<StreamVocabulary>(*config.train_tokens, model.vocab_size);
      model.vocab_size = vocabulary_->rows();
    }
    // Attention written out, as the baseline's: at a context of 64 libtorch's fused attention (lab 09) made the
    // full race's step slower on the 2-core VM (0.087 s against 0.071 s), it wins at a context of 1,024.
    model_ = std::make_unique<gpt::GPT>(model, written_out_attention);
    optimizer_ = std::make_unique<torch::optim::AdamW>(gpt::make_adamw(*model_, config.lr));
    loader_ = std::make_unique<datasets::DataLoaderLite>(*config.train_tokens, config.batch, config.seq);
  }

  void step() override {
    const datasets::Batch batch = loader_->next_batch();
    torch::Tensor loss;
    {
      // The forward pass in bf16 where the CPU multiplies bf16 pairs (bf16_ is decided once, in the constructor).
      speedlabs::AutocastGuard autocast(c10::kCPU, c10::kBFloat16, bf16_ && on_("bf16"));
      loss = vocabulary_ ? vocabulary_->loss((*model_)->hidden(vocabulary_->rows_of(batch.x)).flatten(0, 1),
                                             (*model_)->wte->weight, vocabulary_->rows_of(batch.y).flatten())
                         : (*model_)->forward(batch.x, batch.y).loss;
    }
    loss.backward();
    optimizer_->step();
    optimizer_->zero_grad();
  }

  gpt::NamedTensors weights() override {
    gpt::NamedTensors named = weights_of(*model_);
    for (auto& [name, tensor] : named) {
      if (vocabulary_ && name == kEmbeddingName) tensor = vocabulary_->full_embedding(tensor);
    }
    return named;
  }

  std::vector<std::string> techniques() const override {
    if (bf16_) return {"stream_vocab", "bf16"};
    return {"stream_vocab"};
  }

 private:
  const bool bf16_ = cpu_multiplies_bf16();
  TrainerConfig config_;
  std::function<bool(const char*)> on_;
  std::unique_ptr<gpt::GPT> model_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  std::unique_ptr<datasets::DataLoaderLite> loader_;
  std::unique_ptr<StreamVocabulary> vocabulary_;  // null when stream_vocab is off
};

}  // namespace

std::unique_ptr<Trainer> make_trainer() { return std::make_unique<FastTrainer>(); }

}  // namespace lab13
