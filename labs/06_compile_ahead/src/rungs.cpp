#include "rung_runner.h"

#include <cmath>

#include "common/errors.h"
#include "common/format.h"
#include "common/memory.h"
#include "common/named_enum.h"
#include "common/process.h"
#include "common/timer.h"
#include "datasets/data_loader.h"
#include "labs/05_gpt2/exercise.h"
#include "optimizers.h"

namespace lab06 {

namespace gpt = speedlabs::gpt;

namespace {

const speedlabs::EnumNames<Rung>& rung_names() {
  static const speedlabs::EnumNames<Rung> names("rung", {{Rung::fp32, "fp32"},
                                                         {Rung::tf32, "tf32"},
                                                         {Rung::bf16, "bf16"},
                                                         {Rung::sdpa, "sdpa"},
                                                         {Rung::vocab50304, "vocab50304"},
                                                         {Rung::fused_adamw, "fused_adamw"},
                                                         {Rung::cuda_graph, "cuda_graph"}});
  return names;
}

}  // namespace

const std::vector<Rung>& all_rungs() { return rung_names().values(); }

const std::vector<std::string>& all_rung_names() { return rung_names().names(); }

std::string to_string(Rung rung) { return rung_names().name(rung); }

Rung parse_rung(const std::string& name) { return rung_names().parse(name); }

int64_t padded_vocab_size(int64_t vocab_size, int64_t multiple) {
  if (vocab_size <= 0 || multiple <= 0) {
    throw speedlabs::UsageError("padded_vocab_size: vocab_size (" + std::to_string(vocab_size) + ") and multiple (" +
                                std::to_string(multiple) + ") must be positive");
  }
  return (vocab_size + multiple - 1) / multiple * multiple;
}

std::string Shape::name() const { return std::to_string(batch) + "x" + std::to_string(seq); }

bool at_least(Rung rung, Rung step) { return static_cast<int>(rung) >= static_cast<int>(step); }

speedlabs::Precision rung_precision(Rung rung) {
  if (at_least(rung, Rung::bf16)) return speedlabs::Precision::bf16;
  return at_least(rung, Rung::tf32) ? speedlabs::Precision::tf32 : speedlabs::Precision::fp32;
}

std::string peer_mode(Rung rung) { return at_least(rung, Rung::sdpa) ? "" : to_string(rung); }

Batches load_batches(const std::vector<int32_t>& ids, const Shape& shape, int count, const c10::Device& device) {
  datasets::DataLoaderLite loader(ids, shape.batch, shape.seq);
  Batches batches;
  for (int i = 0; i < count; ++i) {
    const auto batch = loader.next_batch();
    batches.x.push_back(batch.x.to(device));
    batches.y.push_back(batch.y.to(device));
  }
  return batches;
}

gpt::NamedTensors initial_weights(const gpt::GPTConfig& model_config, uint64_t seed) {
  torch::manual_seed(seed);
  gpt::GPT model(model_config);
  gpt::NamedTensors weights;
  for (const auto& item : model->named_parameters()) weights.emplace_back(item.key(), item.value().detach().clone());
  return weights;
}

double mfu_of(double tflops, double peak_tflops) { return peak_tflops > 0 ? tflops / peak_tflops : std::nan(""); }

speedlabs::PeakFormat rung_format(Rung rung) {
  return at_least(rung, Rung::bf16) ? speedlabs::PeakFormat::bf16
         : rung == Rung::tf32       ? speedlabs::PeakFormat::tf32
                                    : speedlabs::PeakFormat::fp32;
}

speedlabs::PeakFormat peer_format(const std::string& name) {
  for (const auto format : {speedlabs::PeakFormat::tf32, speedlabs::PeakFormat::bf16, speedlabs::PeakFormat::fp16}) {
    if (name.find(speedlabs::to_string(format)) != std::string::npos) return format;
  }
  return speedlabs::PeakFormat::fp32;
}

void MfuPeaks::apply(RungResult& r, speedlabs::PeakFormat format) const {
  const auto measured = measured_tflops.find(format);
  const auto theory = theoretical.find(format);
  r.mfu = mfu_of(r.tflops, measured == measured_tflops.end() ? 0 : measured->second);
  r.mfu_theoretical = mfu_of(r.tflops, theory == theoretical.end() ? 0 : theory->second.flops / 1e12);
}

std::string flops_rate(double tflops) {
  using speedlabs::fixed;
  return tflops >= 1 ? fixed(tflops, 2) + " TFLOP/s" : fixed(tflops * 1e3, 1) + " GFLOP/s";
}

gpt::GPT RungRunner::build_model(Rung rung) const {
  gpt::GPTConfig padded = model_config;
  if (at_least(rung, Rung::vocab50304)) padded.vocab_size = padded_vocab_size(model_config.vocab_size, kVocabTile);
  // Below sdpa the chapter's written-out attention: lab 05's causal_attention.
  gpt::GPT model(padded, at_least(rung, Rung::sdpa) ? gpt::AttentionFn(gpt::fused_causal_attention)
                                                    : gpt::AttentionFn(lab05::causal_attention));
  auto params = model->named_parameters();
  torch::NoGradGuard no_grad;
  for (const auto& [name, value] : weights) {
    auto& target = params[name];
    if (target.sizes() == value.sizes()) {
      target.copy_(value);
    } else {  // the padded token embedding: no batch contains or targets the extra ids, so they add near-zero logits
      target.zero_();
      target.narrow(0, 0, value.size(0)).copy_(value);
    }
  }
  model->to(device);
  return model;
}

void RungRunner::summarize_times(Rung rung, RungResult& result, const std::vector<double>& times, int fast_from) const {
  result.first_step_ms = 0;
  for (int i = 0; i <= fast_from; ++i) result.first_step_ms += times[i];
  result.step_ms = speedlabs::summarize_samples({times.begin() + warmup, times.end()});
  result.median_ms = result.step_ms.median;
  const double tokens = static_cast<double>(result.shape.batch * result.shape.seq);
  result.tokens_per_s = tokens / (result.median_ms / 1e3);
  result.tflops = useful_flops_per_step / (result.median_ms / 1e3) / 1e12;
  peaks.apply(result, rung_format(rung));
}

RungResult RungRunner::eager(Rung rung, const Shape& shape) const {
  RungResult result;
  result.name = to_string(rung);
  result.shape = shape;
  speedlabs::reset_peak_memory(device);
  auto model = build_model(rung);
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (at_least(rung, Rung::fused_adamw)) {
    optimizer = std::make_unique<FusedAdamW>(model->parameters(), lr);
  } else {
    optimizer = std::make_unique<ForeachAdamW>(model->parameters(), lr);
  }
  const auto precision = rung_precision(rung);  // never fp16: no rung needs a loss scaler
  auto losses = torch::zeros({total_steps()}, torch::TensorOptions().device(device));
  std::vector<double> times;
  for (int i = 0; i < total_steps(); ++i) {
    speedlabs::stop_if_asked("during the " + result.name + " rung");
    times.push_back(speedlabs::time_once_ms(
        [&] { losses[i].copy_(lab05::train_step(model, *optimizer, batches.x[i], batches.y[i], precision)); }, device));
  }
  summarize_times(rung, result, times, 0);
  result.peak_bytes = speedlabs::peak_memory_bytes(device);
  const auto host_losses = losses.cpu();
  result.losses = std::vector<double>(host_losses.data_ptr<float>(), host_losses.data_ptr<float>() + total_steps());
  result.ran = true;
  return result;
}

}  // namespace lab06
