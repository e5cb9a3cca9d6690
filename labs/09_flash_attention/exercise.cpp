// Lab 09 exercise stubs: replace each body, then check your work with ./lab check 09 (see README.md).
#include "exercise.h"

#include "common/errors.h"

namespace lab09 {

// Why: attention's softmax runs over a row of T scores. To avoid ever holding the whole row, the
// normalizer has to be built from pieces that arrive one block at a time; this is that piece on its own.
// Hints:
// - Keep two tensors shaped like logits but with the last dimension 1: the running maximum m (start at
//   -inf) and the running sum l of exp(x - m) (start at 0). keepdim=true keeps them broadcastable.
// - For each block (logits.narrow(-1, start, length); the last block may be shorter):
//   m' = max(m, block max); l = l * exp(m - m') + sum(exp(block - m')); m = m'.
// - exp(m - m') <= 1 and exp(block - m') <= 1: nothing can overflow, however large the logits.
// - Careful with a row whose entries so far are all -inf: m and m' are both -inf and -inf - -inf is NaN.
// - The answer is exp(logits - m) / l with the final m and l.
torch::Tensor online_softmax(const torch::Tensor& /*logits*/, int64_t /*block*/) {
  // TODO(lab09): the one-pass normalizer, then the probabilities.
  speedlabs::not_implemented("09", "09_flash_attention", "online_softmax");
}

// Why: the written-out attention stores B x n_head x T x T scores (805 MB at T=4096 for 12 heads) and
// reads and writes them several times; the arithmetic is cheap, moving those bytes is what costs. Here
// the scores of one (query block, key block) tile live only while that tile is folded into the output.
// Hints:
// - Work on (B*n_head, T, head_size) views (reshape) so every tile op is one batched call over all heads:
//   torch::bmm, torch::baddbmm. Scale the query block by 1/sqrt(head_size) once.
// - For each query block q0..q0+rows: running max (B*H, rows, 1) = -inf, running sum = 0, an accumulator
//   (B*H, rows, head_size) = 0. Walk key blocks k0 = 0, kv_tile, ... while k0 < q0 + rows (later keys are
//   all in the future). For each tile: scores = q_block k_block^T; where the tile crosses the diagonal
//   set score[i][j] = -inf for key j > query i; new max; rescale = exp(old max - new max);
//   p = exp(scores - new max); sum = sum * rescale + rowsum(p); acc = acc * rescale + p v_block.
// - Then out = acc / sum and lse = max + log(sum) for those rows. Tiles need not divide T: use
//   std::min for the last block's length.
// - Speed: every op is one call into libtorch's thread pool; bigger tiles mean fewer, larger calls. Take
//   the row maximum with amax: max(-1) also computes the argmax, which made an earlier reference 1.5x slower.
//   Faster still (the reference, near SDPA): at::parallel_for over whole heads (this file is compiled with
//   OpenMP, so it runs on libtorch's threads), each tile done in its thread with Eigen on the head's rows, and
//   no libtorch matmul inside those threads (MKL would open a team of its own).
AttentionOutput tiled_attention_forward(const torch::Tensor& /*q*/, const torch::Tensor& /*k*/,
                                        const torch::Tensor& /*v*/, int64_t /*q_tile*/, int64_t /*kv_tile*/) {
  // TODO(lab09): the tiled causal forward with the online softmax, returning the output and the log-sum-exp.
  speedlabs::not_implemented("09", "09_flash_attention", "tiled_attention_forward");
}

}  // namespace lab09
