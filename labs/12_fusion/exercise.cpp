// Lab 12 exercise stubs: replace each body, then check your work with ./lab check 12 (see README.md).
#include "exercise.h"

#include "common/errors.h"

namespace lab12 {

// Why: the plain head writes B*T x V logits (V = 50,257), then their log-softmax, then two gradients of that
// size: for GPT-2 at B=16, T=1024 in float32 that is 3.3 GB per tensor, more than the model. A chunk of rows
// needs only its own rows of logits, and the backward needs one number per row to rebuild them.
// Hints:
// - logits = torch::linear(hidden, weight), in the input's dtype (what libtorch's linear gives), then
//   .to(torch::kFloat): the log-sum-exp and the loss are summed in float32 even for bfloat16 inputs.
// - torch::logsumexp(logits, 1) subtracts the row maximum for you (no overflow).
// - The target's logit: logits.gather(1, targets.unsqueeze(1)).squeeze(1).
// - Return the loss summed (not averaged) over the chunk: the caller divides once by the whole batch's rows.
ChunkForward chunk_forward(const torch::Tensor& /*hidden*/, const torch::Tensor& /*weight*/,
                           const torch::Tensor& /*targets*/) {
  // TODO(lab12): the chunk's logits, their log-sum-exp, the summed cross-entropy.
  speedlabs::not_implemented("12", "12_fusion", "chunk_forward");
}

// Why: autograd would keep the chunk's logits (and their softmax) alive until the backward, for every chunk:
// the whole B*T x V again. Recomputing them from hidden and weight costs one more matmul per chunk and
// keeps the memory at one chunk's rows.
// Hints:
// - Rebuild the logits as in chunk_forward (same dtype path, so they round the same way), in float32.
// - The softmax from the saved lse: (logits - lse.unsqueeze(1)).exp_(); no second reduction over V.
// - Subtract 1 at each row's target: probs.scatter_add_(1, targets.unsqueeze(1), minus ones of shape (rows, 1)).
// - Multiply by grad_scale, then cast to the input dtype for the two matmuls: dlogits.mm(weight) for the
//   hidden states; dlogits.t().mm(hidden) added to grad_weight (addmm_ when the dtypes already match).
torch::Tensor chunk_backward(const torch::Tensor& /*hidden*/, const torch::Tensor& /*weight*/,
                             const torch::Tensor& /*targets*/, const torch::Tensor& /*lse*/,
                             const torch::Tensor& /*grad_scale*/, torch::Tensor& /*grad_weight*/) {
  // TODO(lab12): the chunk's softmax from lse, minus the one-hot targets; both gradients.
  speedlabs::not_implemented("12", "12_fusion", "chunk_backward");
}

}  // namespace lab12
