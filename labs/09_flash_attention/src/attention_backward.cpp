#include "attention_backward.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "exercise.h"

namespace lab09 {

AttentionGradients tiled_attention_backward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                            const torch::Tensor& out, const torch::Tensor& lse,
                                            const torch::Tensor& grad_out, int64_t q_tile, int64_t kv_tile) {
  TORCH_CHECK(q_tile >= 1 && kv_tile >= 1, "tiled_attention_backward: tiles must be at least 1");
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const auto q3 = q.reshape({B * H, T, D});
  const auto k3 = k.reshape({B * H, T, D});
  const auto v3 = v.reshape({B * H, T, D});
  const auto do3 = grad_out.reshape({B * H, T, D});
  const auto lse3 = lse.reshape({B * H, T, 1});
  // D_i = sum_j P_ij dP_ij, which equals dO_i . O_i: one number per row, computed once, not per tile.
  const auto row_dot = (do3 * out.reshape({B * H, T, D})).sum(-1, /*keepdim=*/true);
  auto dq = torch::zeros({B * H, T, D}, q.options());
  auto dk = torch::empty({B * H, T, D}, q.options());
  auto dv = torch::empty({B * H, T, D}, q.options());
  const auto long_options = q.options().dtype(torch::kLong);

  for (int64_t k0 = 0; k0 < T; k0 += kv_tile) {
    const int64_t cols = std::min(kv_tile, T - k0);
    const auto k_block = k3.narrow(1, k0, cols);
    const auto v_block = v3.narrow(1, k0, cols);
    auto dk_block = torch::zeros({B * H, cols, D}, q.options());
    auto dv_block = torch::zeros({B * H, cols, D}, q.options());
    const auto key_index = torch::arange(k0, k0 + cols, long_options).unsqueeze(0);
    // Causal: only queries i >= k0 see these keys, so the walk starts at the query block holding row k0.
    for (int64_t q0 = k0 / q_tile * q_tile; q0 < T; q0 += q_tile) {
      const int64_t rows = std::min(q_tile, T - q0);
      const auto q_block = q3.narrow(1, q0, rows);
      const auto do_block = do3.narrow(1, q0, rows);
      auto scores = torch::bmm(q_block, k_block.transpose(1, 2)).mul_(scale);
      if (k0 + cols - 1 > q0) {  // the tile crosses the diagonal
        const auto query_index = torch::arange(q0, q0 + rows, long_options).unsqueeze(1);
        scores.masked_fill_(key_index > query_index, -std::numeric_limits<double>::infinity());
      }
      const auto probabilities = scores.sub_(lse3.narrow(1, q0, rows)).exp_();  // P = exp(S - L), rebuilt
      dv_block.baddbmm_(probabilities.transpose(1, 2), do_block);
      const auto dp = torch::bmm(do_block, v_block.transpose(1, 2));
      const auto ds = probabilities.mul_(dp.sub_(row_dot.narrow(1, q0, rows)));  // dS = P (dP - D)
      dq.narrow(1, q0, rows).baddbmm_(ds, k_block, /*beta=*/1.0, /*alpha=*/scale);
      dk_block.baddbmm_(ds.transpose(1, 2), q_block, /*beta=*/1.0, /*alpha=*/scale);
    }
    dk.narrow(1, k0, cols).copy_(dk_block);
    dv.narrow(1, k0, cols).copy_(dv_block);
  }
  return {dq.view(q.sizes()), dk.view(k.sizes()), dv.view(v.sizes())};
}

torch::Tensor TiledAttentionFunction::forward(torch::autograd::AutogradContext* context, const torch::Tensor& q,
                                              const torch::Tensor& k, const torch::Tensor& v, int64_t q_tile,
                                              int64_t kv_tile) {
  const AttentionOutput result = tiled_attention_forward(q, k, v, q_tile, kv_tile);
  context->save_for_backward({q, k, v, result.out, result.lse});
  context->saved_data["q_tile"] = q_tile;
  context->saved_data["kv_tile"] = kv_tile;
  return result.out;
}

torch::autograd::variable_list TiledAttentionFunction::backward(torch::autograd::AutogradContext* context,
                                                                torch::autograd::variable_list grad_outputs) {
  const auto saved = context->get_saved_variables();
  const AttentionGradients grads =
      tiled_attention_backward(saved[0], saved[1], saved[2], saved[3], saved[4], grad_outputs[0].contiguous(),
                               context->saved_data["q_tile"].toInt(), context->saved_data["kv_tile"].toInt());
  return {grads.dq, grads.dk, grads.dv, torch::Tensor(), torch::Tensor()};
}

torch::Tensor tiled_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t q_tile,
                              int64_t kv_tile) {
  return TiledAttentionFunction::apply(q, k, v, q_tile, kv_tile);
}

}  // namespace lab09
