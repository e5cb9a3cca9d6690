// Lab 05 exercise: GPT-2's attention written out, and the training step in four precisions.
//
// Replace each stub below; the comment above each TODO says why the function exists and how to write it.
// The declarations and their full contracts are in exercise.h; the lesson is README.md ("The exercise").
// Check your work with ./lab check 05.
#include "exercise.h"

#include "common/autocast_guard.h"
#include "common/errors.h"

namespace lab05 {

// Why: this is attention as the chapter writes it before flash attention. It builds the whole (T, T)
// score matrix of every head, which is exactly the memory traffic the fused kernel avoids; lab 06 measures
// the difference. The lab trains GPT-2 with your function.
// Hints:
// - scores = q k^T / sqrt(head_size): torch::matmul(q, k.transpose(-2, -1)), head_size = q.size(-1).
// - The causal mask: a (T, T) boolean tensor that is true above the diagonal (torch::ones(...).triu(1));
//   scores.masked_fill(mask, -infinity) gives those positions weight exactly 0 after the softmax.
// - torch::softmax over the last dimension, then torch::matmul with v.
// - Make the mask on q's device (q.options().dtype(torch::kBool)).
torch::Tensor causal_attention(const torch::Tensor& /*q*/, const torch::Tensor& /*k*/, const torch::Tensor& /*v*/) {
  // TODO(lab05): softmax(q k^T / sqrt(head_size), future masked to -inf) v.
  speedlabs::not_implemented("05", "05_gpt2", "causal_attention");
}

// Why: the four modes of chapter 9 differ only in what one training step switches on; the lab runs the same
// loop in each mode and compares speed and loss. Getting the order right is the lesson: the forward pass
// (and the loss) under autocast, backward outside it, and in fp16 the scaler around backward and the step.
// Hints:
// - speedlabs::MatmulPrecisionScope (common/precision.h) sets torch's float32 matmul precision until the
//   end of its scope: "high" for tf32, "highest" for every other mode.
// - The autocast dtype: bf16 -> c10::kBFloat16, fp16 -> c10::kHalf, none for fp32 and tf32. A
//   speedlabs::AutocastGuard(x.device().type(), dtype, enabled) in a block around model->forward(x, y).loss
//   (pass enabled = false for the modes without autocast).
// - fp16 needs the scaler: TORCH_CHECK(scaler != nullptr, "...") first, then after the forward pass
//   scaler->scale(loss).backward(); scaler->step(optimizer); scaler->update(). Other modes:
//   loss.backward(); optimizer.step(). Then optimizer.zero_grad().
// - Return loss.detach().to(torch::kFloat): no .item(), nothing waits for the device.
torch::Tensor train_step(speedlabs::gpt::GPT& /*model*/, torch::optim::Optimizer& /*optimizer*/,
                         const torch::Tensor& /*x*/, const torch::Tensor& /*y*/, speedlabs::Precision /*precision*/,
                         lab03::GradScaler* /*scaler*/) {
  // TODO(lab05): one training step in the given precision mode.
  speedlabs::not_implemented("05", "05_gpt2", "train_step");
}

}  // namespace lab05
