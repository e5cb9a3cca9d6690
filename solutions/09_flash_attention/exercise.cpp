// Lab 09 reference solution.
#include "exercise.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <ATen/Parallel.h>
#include <Eigen/Core>

namespace lab09 {

namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();
constexpr float kMinusInfinityF = -std::numeric_limits<float>::infinity();

// Row-major float matrices: a contiguous (rows, head_size) slice of a torch tensor maps onto one as is.
using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const Matrix>;
using MatrixMap = Eigen::Map<Matrix>;

// What one thread keeps while it works: one tile of scores and a few numbers per query row, allocated once
// per thread and reused for every block of every head it takes. Nothing here grows with T.
struct TileScratch {
  TileScratch(int64_t q_tile, int64_t kv_tile)
      : storage(torch::empty({q_tile, kv_tile})),  // a tensor, so that memory meters see the tile
        scores(storage.data_ptr<float>(), q_tile, kv_tile),
        row_max(q_tile),
        row_sum(q_tile),
        new_max(q_tile),
        rescale(q_tile) {}
  torch::Tensor storage;
  MatrixMap scores;                  // one (rows, cols) tile, its top-left corner at each step
  Eigen::VectorXf row_max, row_sum;  // per row: the running maximum and the running sum against it
  Eigen::VectorXf new_max, rescale;  // per row: the maximum after this tile, exp(old maximum - new maximum)
};

// Sets the scores of keys after each row's query (key k0 + j > query q0 + i) to @p value.
template <typename Tile>
void mask_future(Tile&& scores, int64_t q0, int64_t k0, float value) {
  for (int64_t i = 0; i < scores.rows(); ++i) {
    for (int64_t j = std::max<int64_t>(0, q0 + i + 1 - k0); j < scores.cols(); ++j) scores(i, j) = value;
  }
}

// One block of @p rows (already scaled) query rows walks the key blocks up to its last row, folding each
// tile of scores into @p out (rows, D), which ends as the block's output; @p lse receives the rows'
// log-sum-exp. @p k and @p v point at the head's keys and values, (T, D) each.
void attend_query_block(const float* q, const float* k, const float* v, int64_t rows, int64_t D, int64_t q0,
                        int64_t kv_tile, float* out, float* lse, TileScratch& scratch) {
  const ConstMatrixMap q_block(q, rows, D);
  MatrixMap acc(out, rows, D);
  auto row_max = scratch.row_max.head(rows), row_sum = scratch.row_sum.head(rows);
  auto new_max = scratch.new_max.head(rows), rescale = scratch.rescale.head(rows);
  acc.setZero();
  row_max.setConstant(kMinusInfinityF);
  row_sum.setZero();
  for (int64_t k0 = 0; k0 < q0 + rows; k0 += kv_tile) {  // causal: later keys are masked for every row
    const int64_t cols = std::min(kv_tile, q0 + rows - k0);
    const ConstMatrixMap k_block(k + k0 * D, cols, D), v_block(v + k0 * D, cols, D);
    auto scores = scratch.scores.topLeftCorner(rows, cols);
    scores.noalias() = q_block * k_block.transpose();  // one matmul: the whole tile of scores
    const bool diagonal = k0 + cols - 1 > q0;          // the tile crosses the diagonal
    if (diagonal) mask_future(scores, q0, k0, kMinusInfinityF);
    // Key 0 is in the first tile and every row sees it, so new_max is finite from then on.
    new_max = row_max.cwiseMax(scores.rowwise().maxCoeff());
    rescale.array() = (row_max - new_max).array().exp();  // about 0 on the first tile, where row_max is -inf
    // In place, row by row: the scores become weights. One row at a time, Eigen's exp runs 16 lanes wide; a
    // column broadcast over the row-major tile would make it call the scalar expf for every element.
    for (int64_t i = 0; i < rows; ++i) scores.row(i).array() = (scores.row(i).array() - new_max(i)).exp();
    // Eigen's vectorised exp clamps its argument, giving 1e-38 for -inf: the future's weights are set to 0.
    if (diagonal) mask_future(scores, q0, k0, 0.0f);
    row_sum = row_sum.cwiseProduct(rescale) + scores.rowwise().sum();
    acc.array().colwise() *= rescale.array();
    acc.noalias() += scores * v_block;  // the second matmul: weights times the tile's values
    row_max = new_max;
  }
  acc.array().colwise() /= row_sum.array();
  Eigen::Map<Eigen::VectorXf>(lse, rows) = (row_max.array() + row_sum.array().log()).matrix();
}

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
  TORCH_CHECK(q.scalar_type() == torch::kFloat && q.device().is_cpu() && k.scalar_type() == torch::kFloat &&
                  v.scalar_type() == torch::kFloat,
              "tiled_attention_forward: q, k, v must be float32 on the CPU");
  torch::NoGradGuard no_grad;  // the gradients come from tiled_attention_backward, not through these ops
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  // The queries scaled once (not every tile of scores); contiguous rows so each head is a (T, D) matrix.
  const auto q3 = (q.reshape({B * H, T, D}) * scale).contiguous();
  const auto k3 = k.reshape({B * H, T, D}).contiguous();
  const auto v3 = v.reshape({B * H, T, D}).contiguous();
  auto out = torch::empty({B * H, T, D}, q.options());
  auto lse = torch::empty({B * H, T}, q.options());
  const float *q_data = q3.data_ptr<float>(), *k_data = k3.data_ptr<float>(), *v_data = v3.data_ptr<float>();
  float *out_data = out.data_ptr<float>(), *lse_data = lse.data_ptr<float>();

  // Heads are independent: libtorch's threads take whole heads and work on one tile at a time in their own
  // cache, the tile's matmuls Eigen's, single-threaded in that thread. This file is compiled with OpenMP
  // (labs/09_flash_attention/CMakeLists.txt), so at::parallel_for runs on the threads SDPA just used.
  const int64_t heads = B * H;
  at::parallel_for(0, heads, 1, [&](int64_t first_head, int64_t end_head) {
    TileScratch scratch(std::min(q_tile, T), std::min(kv_tile, T));
    for (int64_t head = first_head; head < end_head; ++head) {
      const int64_t offset = head * T * D;
      for (int64_t q0 = 0; q0 < T; q0 += q_tile) {
        attend_query_block(q_data + offset + q0 * D, k_data + offset, v_data + offset, std::min(q_tile, T - q0), D, q0,
                           kv_tile, out_data + offset + q0 * D, lse_data + head * T + q0, scratch);
      }
    }
  });
  return {out.view({B, H, T, D}), lse.view({B, H, T})};
}

}  // namespace lab09
