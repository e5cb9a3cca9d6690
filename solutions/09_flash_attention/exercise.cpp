// Lab 09 reference solution.
#include "exercise.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lab09 {

namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

}  // namespace

torch::Tensor online_softmax(const torch::Tensor& logits, int64_t block) {
  TORCH_CHECK(block >= 1, "online_softmax: block must be at least 1, got ", block);
  TORCH_CHECK(logits.dim() >= 1, "online_softmax: logits need at least one dimension");
  const int64_t n = logits.size(-1);
  auto running_max = torch::full_like(logits.narrow(-1, 0, std::min<int64_t>(n, 1)), kMinusInfinity);
  auto running_sum = torch::zeros_like(running_max);
  for (int64_t start = 0; start < n; start += block) {
    const auto chunk = logits.narrow(-1, start, std::min(block, n - start));
    const auto new_max = torch::maximum(running_max, chunk.amax(-1, /*keepdim=*/true));
    // A row whose entries so far are all -inf has max -inf; exp(-inf - -inf) would be NaN, so shift by 0 there.
    const auto shift = torch::where(torch::isinf(new_max), torch::zeros_like(new_max), new_max);
    running_sum = running_sum * torch::exp(running_max - shift) + torch::exp(chunk - shift).sum(-1, true);
    running_max = new_max;
  }
  return torch::exp(logits - running_max) / running_sum;
}

AttentionOutput tiled_attention_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                        int64_t q_tile, int64_t kv_tile) {
  TORCH_CHECK(q_tile >= 1 && kv_tile >= 1, "tiled_attention_forward: tiles must be at least 1");
  TORCH_CHECK(q.dim() == 4 && q.sizes() == k.sizes() && q.sizes() == v.sizes(),
              "tiled_attention_forward: q, k, v must be (B, n_head, T, head_size) and alike");
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  // One batch of B*H independent heads: every tile op below is one batched call over all of them.
  const auto q3 = q.reshape({B * H, T, D});
  const auto k3 = k.reshape({B * H, T, D});
  const auto v3 = v.reshape({B * H, T, D});
  auto out = torch::empty({B * H, T, D}, q.options());
  auto lse = torch::empty({B * H, T}, q.options());

  for (int64_t q0 = 0; q0 < T; q0 += q_tile) {
    const int64_t rows = std::min(q_tile, T - q0);
    const auto q_block = q3.narrow(1, q0, rows) * scale;  // scale the queries once, not every tile of scores
    auto row_max = torch::full({B * H, rows, 1}, kMinusInfinity, q.options());
    auto row_sum = torch::zeros({B * H, rows, 1}, q.options());
    auto acc = torch::zeros({B * H, rows, D}, q.options());
    const auto query_index = torch::arange(q0, q0 + rows, q.options().dtype(torch::kLong)).unsqueeze(1);

    // Causal: keys after the block's last query are masked for every row, so the walk stops there.
    for (int64_t k0 = 0; k0 < q0 + rows; k0 += kv_tile) {
      const int64_t cols = std::min(kv_tile, q0 + rows - k0);
      auto scores = torch::bmm(q_block, k3.narrow(1, k0, cols).transpose(1, 2));  // (B*H, rows, cols)
      if (k0 + cols - 1 > q0) {  // the tile crosses the diagonal: mask key j > query i
        const auto key_index = torch::arange(k0, k0 + cols, query_index.options()).unsqueeze(0);
        scores.masked_fill_(key_index > query_index, kMinusInfinity);
      }
      // The first tile (k0 = 0) always holds key 0, which every row sees, so row_max is finite from then on.
      const auto new_max = torch::maximum(row_max, scores.amax(-1, /*keepdim=*/true));  // amax: no argmax wanted
      const auto rescale = torch::exp(row_max - new_max);  // 0 on the first tile: exp(-inf)
      const auto weights = scores.sub_(new_max).exp_();    // in place: the tile of scores becomes its weights
      row_sum = row_sum * rescale + weights.sum(-1, /*keepdim=*/true);
      acc = torch::baddbmm(acc * rescale, weights, v3.narrow(1, k0, cols));
      row_max = new_max;
    }
    out.narrow(1, q0, rows).copy_(acc / row_sum);
    lse.narrow(1, q0, rows).copy_((row_max + torch::log(row_sum)).squeeze(-1));
  }
  return {out.view({B, H, T, D}), lse.view({B, H, T})};
}

}  // namespace lab09
