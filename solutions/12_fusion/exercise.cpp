// Lab 12 reference: one chunk of the linear + cross-entropy, forward and backward.
#include "exercise.h"

namespace lab12 {

namespace {

// The chunk's logits in float32, made in the input's dtype first (libtorch's linear rounds them there).
torch::Tensor float_logits(const torch::Tensor& hidden, const torch::Tensor& weight) {
  return torch::linear(hidden, weight).to(torch::kFloat);
}

}  // namespace

ChunkForward chunk_forward(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets) {
  const auto logits = float_logits(hidden, weight);
  auto lse = torch::logsumexp(logits, 1);
  const auto target_logit = logits.gather(1, targets.unsqueeze(1)).squeeze(1);
  return {(lse - target_logit).sum(), lse};
}

torch::Tensor chunk_backward(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets,
                             const torch::Tensor& lse, const torch::Tensor& grad_scale, torch::Tensor& grad_weight) {
  auto probs = float_logits(hidden, weight).sub_(lse.unsqueeze(1)).exp_();
  probs.scatter_add_(1, targets.unsqueeze(1), -torch::ones({hidden.size(0), 1}, probs.options()));
  const auto dlogits = probs.mul_(grad_scale).to(hidden.scalar_type());
  if (grad_weight.scalar_type() == dlogits.scalar_type()) {
    grad_weight.addmm_(dlogits.t(), hidden);
  } else {
    grad_weight.add_(dlogits.t().mm(hidden));
  }
  return dlogits.mm(weight);
}

}  // namespace lab12
