// Lab 13 exercise: your speedrun trainer.
//
// This stub is a plain float32 AdamW trainer, the same recipe as the lab's baseline (baseline.cpp), so it runs
// as it is and scores about 1. Make it reach the target in less time. The contract is in exercise.h; the rules
// and the order in which to try things are in README.md ("The exercise"). Race it with ./lab speedrun --quick,
// check it with ./lab check 13.
//
// TODO(lab13): make this trainer faster. Ideas, each from an earlier lab or this one's lesson (measure each one
// on its own, on the full race too: some win the quick race and lose the full one):
// - the head is most of a small model's time (50,257 logits a token): the training stream holds far fewer
//   tokens, and stream_vocab.h gives a head over only those that still computes the whole vocabulary's loss
//   (build your GPT with StreamVocabulary::rows() rows, feed it rows_of() the ids, and hand back
//   full_embedding() in weights());
// - labs 03 and 05: the forward pass under bf16 autocast where the CPU has bf16 instructions (avx512_bf16);
// - lab 09: libtorch's fused attention (speedlabs::gpt::fused_causal_attention) instead of the attention
//   written out (written_out_attention, baseline.h): measure it at this context;
// - the batch size: a step on fewer sequences costs less and, early in training, moves the loss nearly as far
//   (load your own B in init() and return it from batch());
// - the learning rate and its schedule: a warm-up, a peak and a decay change how many steps the target needs.
// List what you use in techniques(), and honour TrainerConfig::disabled, so the lab's ablation can measure each.
#include "exercise.h"
#include "baseline.h"
#include "common/gpt.h"
#include "datasets/data_loader.h"

namespace lab13 {

namespace gpt = speedlabs::gpt;

namespace {

class PlainTrainer : public Trainer {
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

std::unique_ptr<Trainer> make_trainer() { return std::make_unique<PlainTrainer>(); }

}  // namespace lab13
