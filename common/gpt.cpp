#include "common/gpt.h"

#include <cmath>

#include "common/errors.h"

namespace speedlabs::gpt {

torch::Tensor fused_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true);
}

namespace {

// Matches the chapter's init: every weight N(0, std), every bias 0.
torch::nn::Linear make_linear(int64_t in, int64_t out, double std) {
  torch::nn::Linear linear(torch::nn::LinearOptions(in, out).bias(true));
  torch::NoGradGuard no_grad;
  linear->weight.normal_(0.0, std);
  linear->bias.zero_();
  return linear;
}

constexpr double kInitStd = 0.02;

double residual_std(const GPTConfig& config) { return kInitStd / std::sqrt(2.0 * config.n_layer); }

}  // namespace

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GPTConfig& config, AttentionFn attention)
    : n_head_(config.n_head), attention_(std::move(attention)) {
  if (config.n_embd % config.n_head != 0) {
    throw UsageError("n_embd (" + std::to_string(config.n_embd) + ") must be a multiple of n_head (" +
                     std::to_string(config.n_head) + ")");
  }
  c_attn = register_module("c_attn", make_linear(config.n_embd, 3 * config.n_embd, kInitStd));
  c_proj = register_module("c_proj", make_linear(config.n_embd, config.n_embd, residual_std(config)));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  const auto qkv = c_attn->forward(x).split(C, /*dim=*/2);
  // (B, T, C) -> (B, n_head, T, head_size): each head attends independently.
  const auto heads = [&](const torch::Tensor& t) { return t.view({B, T, n_head_, C / n_head_}).transpose(1, 2); };
  const auto y = attention_(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]));
  return c_proj->forward(y.transpose(1, 2).contiguous().view({B, T, C}));
}

MLPImpl::MLPImpl(const GPTConfig& config) {
  c_fc = register_module("c_fc", make_linear(config.n_embd, 4 * config.n_embd, kInitStd));
  c_proj = register_module("c_proj", make_linear(4 * config.n_embd, config.n_embd, residual_std(config)));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  return c_proj->forward(torch::gelu(c_fc->forward(x), "tanh"));
}

BlockImpl::BlockImpl(const GPTConfig& config, AttentionFn attention) {
  ln_1 = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.n_embd})));
  attn = register_module("attn", CausalSelfAttention(config, std::move(attention)));
  ln_2 = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.n_embd})));
  mlp = register_module("mlp", MLP(config));
}

torch::Tensor BlockImpl::forward(torch::Tensor x) {
  x = x + attn->forward(ln_1->forward(x));
  return x + mlp->forward(ln_2->forward(x));
}

GPTImpl::GPTImpl(const GPTConfig& config, AttentionFn attention) : config_(config) {
  // The Python model keeps these under `transformer.`; a ModuleDict gives the same parameter names.
  wte = torch::nn::Embedding(config.vocab_size, config.n_embd);
  wpe = torch::nn::Embedding(config.block_size, config.n_embd);
  h = torch::nn::ModuleList();
  for (int64_t i = 0; i < config.n_layer; ++i) h->push_back(Block(config, attention));
  ln_f = torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.n_embd}));
  register_module("transformer", torch::nn::ModuleDict(std::vector<std::pair<std::string, std::shared_ptr<Module>>>{
                                     {"wte", wte.ptr()}, {"wpe", wpe.ptr()}, {"h", h.ptr()}, {"ln_f", ln_f.ptr()}}));
  torch::NoGradGuard no_grad;
  wte->weight.normal_(0.0, kInitStd);
  wpe->weight.normal_(0.0, kInitStd);
}

torch::Tensor GPTImpl::hidden(const torch::Tensor& idx) {
  const int64_t T = idx.size(1);
  config_.require_sequence_fits(T, "the input's sequence length");
  const auto positions = torch::arange(T, idx.options().dtype(torch::kLong));
  auto x = wte->forward(idx) + wpe->forward(positions);
  for (const auto& block : *h) x = block->as<Block>()->forward(x);
  return ln_f->forward(x);
}

GPTOutput GPTImpl::forward(const torch::Tensor& idx, const torch::Tensor& targets) {
  GPTOutput out;
  out.logits = torch::nn::functional::linear(hidden(idx), wte->weight);  // the tied lm_head, no bias
  if (targets.defined()) {
    out.loss = torch::nn::functional::cross_entropy(out.logits.view({-1, out.logits.size(-1)}), targets.view({-1}));
  }
  return out;
}

void GPTImpl::set_attention(const AttentionFn& attention) {
  for (const auto& block : *h) block->as<Block>()->attn->set_attention(attention);
}

int64_t parameter_count(GPT& model) {
  int64_t total = 0;
  for (const auto& p : model->parameters()) total += p.numel();  // parameters() lists the tied weight once
  return total;
}

torch::optim::AdamW make_adamw(GPT& model, double lr) {
  return torch::optim::AdamW(model->parameters(),
                             torch::optim::AdamWOptions(lr).betas({0.9, 0.999}).eps(1e-8).weight_decay(0.01));
}

}  // namespace speedlabs::gpt
