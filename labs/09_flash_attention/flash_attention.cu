// Lab 09 optional GPU exercise stub: write the kernel, then run ./lab run 09 --device cuda on a GPU machine
// (check your work there with ctest -L lab09 -L gpu; the CPU exercise is checked with ./lab check 09).
#include "common/cuda/check.h"
#include "common/errors.h"
#include "flash_attention.h"

namespace lab09::cuda {

// Why: the CPU tiled forward shows the algorithm; on a GPU the same tiling is what keeps the T x T scores
// out of HBM entirely. One thread block owns a block of query rows of one (batch, head); its tile of keys
// and values sits in shared memory, which every thread of the block reads.
// Hints:
// - Grid (ceil(seq / rows per block), heads, batch); one thread per query row is the simplest layout: it
//   holds its query (scaled by 1/sqrt(head_size)), running max, running sum and output row in registers.
// - Per key tile: all threads copy the tile of k and v into __shared__ arrays (coalesced: consecutive
//   threads read consecutive floats), __syncthreads(), each thread computes its scores against the tile
//   (key j > its row i is masked), rescales as in the CPU version, accumulates p * v, then __syncthreads()
//   before the next tile overwrites shared memory. Rows past seq still take part in loads and barriers.
// - Template the kernel on head_size so the per-thread arrays have a compile-time size (registers).
// - Check the launch with SPEEDLABS_CUDA_CHECK(cudaGetLastError()) (common/cuda/check.h): a bad launch
//   configuration shows there, and the macro throws with the runtime's text.
void flash_attention_forward(const float* /*q*/, const float* /*k*/, const float* /*v*/, float* /*out*/, float* /*lse*/,
                             int64_t /*batch*/, int64_t /*heads*/, int64_t /*seq*/, int64_t /*head_size*/) {
  // TODO(lab09): the optional GPU exercise: the tiled forward as a CUDA kernel with shared memory.
  throw speedlabs::NotImplementedError(
      "not implemented yet: TODO(lab09) flash_attention_forward (CUDA, optional) -- see "
      "labs/09_flash_attention/README.md");
}

}  // namespace lab09::cuda
