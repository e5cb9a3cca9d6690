#include "chunked_head.h"

#include <torch/torch.h>

#include <algorithm>

#include "common/errors.h"
#include "exercise.h"

namespace lab12 {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

class ChunkedLinearCrossEntropy : public torch::autograd::Function<ChunkedLinearCrossEntropy> {
 public:
  // hidden (N, C), weight (V, C), targets (N): autograd calls this with grad mode off, so nothing inside is
  // recorded; what the backward needs is saved explicitly.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden, const torch::Tensor& weight,
                               const torch::Tensor& targets, int64_t chunk) {
    const int64_t rows = hidden.size(0);
    auto lse = torch::empty({rows}, hidden.options().dtype(torch::kFloat));
    auto total = torch::zeros({}, hidden.options().dtype(torch::kFloat));
    for (int64_t start = 0; start < rows; start += chunk) {
      const int64_t length = std::min(chunk, rows - start);
      const ChunkForward part =
          chunk_forward(hidden.narrow(0, start, length), weight, targets.narrow(0, start, length));
      total.add_(part.loss_sum);
      lse.narrow(0, start, length).copy_(part.lse);
    }
    ctx->save_for_backward({hidden, weight, targets, lse});
    ctx->saved_data["chunk"] = chunk;
    return total.div_(static_cast<double>(rows));
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const auto& hidden = saved[0];
    const auto& weight = saved[1];
    const auto& targets = saved[2];
    const auto& lse = saved[3];
    const int64_t chunk = ctx->saved_data["chunk"].toInt();
    const int64_t rows = hidden.size(0);
    // d loss / d logit = grad_output / rows * (softmax - one_hot): the same scale for every chunk.
    const auto grad_scale = grad_outputs[0].to(torch::kFloat) / static_cast<double>(rows);
    auto grad_hidden = torch::empty_like(hidden);
    auto grad_weight = torch::zeros(weight.sizes(), weight.options().dtype(torch::kFloat));
    for (int64_t start = 0; start < rows; start += chunk) {
      const int64_t length = std::min(chunk, rows - start);
      grad_hidden.narrow(0, start, length)
          .copy_(chunk_backward(hidden.narrow(0, start, length), weight, targets.narrow(0, start, length),
                                lse.narrow(0, start, length), grad_scale, grad_weight));
    }
    return {grad_hidden, grad_weight.to(weight.scalar_type()), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor chunked_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                    const torch::Tensor& targets, int64_t chunk) {
  if (chunk < 1) throw speedlabs::UsageError("lab12: the chunk must be at least 1 row, got " + std::to_string(chunk));
  const int64_t width = hidden.size(-1);
  return ChunkedLinearCrossEntropy::apply(hidden.reshape({-1, width}), weight, targets.reshape({-1}), chunk);
}

torch::Tensor plain_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                  const torch::Tensor& targets) {
  const auto logits = torch::linear(hidden, weight);
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

}  // namespace lab12
