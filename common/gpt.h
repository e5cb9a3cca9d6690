/// @file gpt.h
/// @brief GPT-2 (the 124M model of chapter 9) in libtorch, and a small tensor file format for comparing it
/// with the Python reference.
///
/// The architecture is the one of the chapter's code: token + position embeddings, pre-LayerNorm
/// blocks (causal self-attention, then a GELU(tanh) MLP, each added to the residual stream), a final
/// LayerNorm and an `lm_head` without bias that shares its weight with the token embedding.
/// Parameter names follow the Python model (`transformer.h.0.attn.c_attn.weight`, ...), so the
/// parity test (reference/gpt_reference.py) can load them by name.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/gpt_config.h"
#include "common/tensor_file.h"

namespace speedlabs::gpt {

/// An attention function: q, k, v are (B, n_head, T, head_size); returns (B, n_head, T, head_size),
/// each position attending only to itself and earlier positions.
using AttentionFn =
    std::function<torch::Tensor(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v)>;

/// The default attention: libtorch's fused at::scaled_dot_product_attention with is_causal.
/// @param q queries (B, n_head, T, head_size)
/// @param k keys, same shape
/// @param v values, same shape
torch::Tensor fused_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

/// Causal self-attention: one linear layer makes q, k, v for all heads, then attention, then a projection.
class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  /// @param config    the model size (n_embd must be a multiple of n_head)
  /// @param attention the attention function applied to the heads
  CausalSelfAttentionImpl(const GPTConfig& config, AttentionFn attention);
  /// @param x (B, T, n_embd) @return (B, T, n_embd)
  torch::Tensor forward(const torch::Tensor& x);
  /// Replaces the attention function.
  /// @param attention the new function
  void set_attention(AttentionFn attention) { attention_ = std::move(attention); }

  torch::nn::Linear c_attn{nullptr};  ///< n_embd -> 3 n_embd (q, k, v)
  torch::nn::Linear c_proj{nullptr};  ///< n_embd -> n_embd, a residual projection

 private:
  int64_t n_head_;
  AttentionFn attention_;
};
TORCH_MODULE(CausalSelfAttention);

/// The feed-forward part of a block: n_embd -> 4 n_embd, GELU (tanh approximation), back to n_embd.
class MLPImpl : public torch::nn::Module {
 public:
  /// @param config the model size
  explicit MLPImpl(const GPTConfig& config);
  /// @param x (B, T, n_embd) @return (B, T, n_embd)
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear c_fc{nullptr};    ///< n_embd -> 4 n_embd
  torch::nn::Linear c_proj{nullptr};  ///< 4 n_embd -> n_embd, a residual projection
};
TORCH_MODULE(MLP);

/// A pre-LayerNorm transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class BlockImpl : public torch::nn::Module {
 public:
  /// @param config    the model size
  /// @param attention the attention function
  BlockImpl(const GPTConfig& config, AttentionFn attention);
  /// @param x (B, T, n_embd) @return (B, T, n_embd)
  torch::Tensor forward(torch::Tensor x);

  torch::nn::LayerNorm ln_1{nullptr};  ///< before attention
  CausalSelfAttention attn{nullptr};   ///< the attention
  torch::nn::LayerNorm ln_2{nullptr};  ///< before the MLP
  MLP mlp{nullptr};                    ///< the MLP
};
TORCH_MODULE(Block);

/// What GPT::forward returns.
struct GPTOutput {
  torch::Tensor logits;  ///< (B, T, vocab_size)
  torch::Tensor loss;    ///< mean cross-entropy over all B*T positions; undefined without targets
};

/// GPT-2. Weights are initialised as in the chapter: N(0, 0.02), residual projections (attn.c_proj,
/// mlp.c_proj) N(0, 0.02 / sqrt(2 n_layer)) so the residual stream's variance does not grow with
/// depth, biases 0, LayerNorms 1 and 0. Seed torch before constructing for reproducible weights.
class GPTImpl : public torch::nn::Module {
 public:
  /// @param config    the model size
  /// @param attention the attention function of every block (default: fused_causal_attention)
  explicit GPTImpl(const GPTConfig& config, AttentionFn attention = fused_causal_attention);

  /// @param idx     (B, T) int64 token ids, T <= block_size (UsageError otherwise)
  /// @param targets (B, T) int64 next-token ids, or an undefined tensor for logits only
  GPTOutput forward(const torch::Tensor& idx, const torch::Tensor& targets = {});

  /// The final hidden states: the forward pass up to and including the final LayerNorm, without the head.
  /// @param idx (B, T) int64 token ids, T <= block_size (UsageError otherwise)
  /// @return (B, T, n_embd)
  torch::Tensor hidden(const torch::Tensor& idx);

  /// Replaces the attention function of every block.
  /// @param attention the new function
  void set_attention(const AttentionFn& attention);

  /// The model's size.
  const GPTConfig& config() const { return config_; }

  /// The logits' weight, shared with the token embedding (weight tying: one tensor, one gradient).
  const torch::Tensor& lm_head_weight() const { return wte->weight; }

  torch::nn::Embedding wte{nullptr};   ///< token embedding (vocab_size, n_embd), also the lm_head
  torch::nn::Embedding wpe{nullptr};   ///< position embedding (block_size, n_embd)
  torch::nn::ModuleList h{nullptr};    ///< the n_layer blocks
  torch::nn::LayerNorm ln_f{nullptr};  ///< the final LayerNorm

 private:
  GPTConfig config_;
};
TORCH_MODULE(GPT);

/// Number of distinct parameters (the tied lm_head weight counted once): 124,439,808 for gpt2().
/// @param model the model
int64_t parameter_count(GPT& model);

/// The AdamW of the chapter: lr, betas (0.9, 0.999), eps 1e-8, weight decay 0.01 (PyTorch's defaults).
/// @param model the model whose parameters it updates
/// @param lr    the learning rate
torch::optim::AdamW make_adamw(GPT& model, double lr);

}  // namespace speedlabs::gpt
