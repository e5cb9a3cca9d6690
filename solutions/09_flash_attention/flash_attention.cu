// Lab 09 reference for the optional GPU exercise: the tiled causal attention forward as a CUDA kernel.
#include <cuda_runtime.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "common/cuda/check.h"
#include "flash_attention.h"

namespace lab09::cuda {
namespace {

constexpr int kRowsPerBlock = 64;  // query rows per thread block: one thread each

constexpr int kKeysPerTile = 64;  // keys per shared-memory tile: k and v tiles of head size 64 take 32 KiB

// One block per (query tile, head, batch); thread r owns query row q0 + r for the whole walk.
template <int HeadSize>
__global__ void flash_forward_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                     const float* __restrict__ v, float* __restrict__ out, float* __restrict__ lse,
                                     int seq, float scale) {
  __shared__ float k_tile[kKeysPerTile][HeadSize];
  __shared__ float v_tile[kKeysPerTile][HeadSize];

  const int q0 = blockIdx.x * kRowsPerBlock;
  const int row = q0 + threadIdx.x;
  const bool active = row < seq;  // rows past the end still load tiles and meet every barrier
  const size_t head_offset = (static_cast<size_t>(blockIdx.z) * gridDim.y + blockIdx.y) * seq * HeadSize;
  const float* q_head = q + head_offset;
  const float* k_head = k + head_offset;
  const float* v_head = v + head_offset;

  float query[HeadSize];
  float acc[HeadSize];
  for (int d = 0; d < HeadSize; ++d) {
    query[d] = active ? q_head[static_cast<size_t>(row) * HeadSize + d] * scale : 0.0f;
    acc[d] = 0.0f;
  }
  float row_max = -INFINITY;
  float row_sum = 0.0f;

  // Causal: the block's last row is q0 + kRowsPerBlock - 1, so no later key can matter to it.
  const int key_end = min(seq, q0 + kRowsPerBlock);
  for (int k0 = 0; k0 < key_end; k0 += kKeysPerTile) {
    // Stage the tile: consecutive threads copy consecutive floats (coalesced); rows past seq become 0.
    for (int i = threadIdx.x; i < kKeysPerTile * HeadSize; i += blockDim.x) {
      const int key = k0 + i / HeadSize;
      const size_t at = static_cast<size_t>(k0) * HeadSize + i;
      k_tile[i / HeadSize][i % HeadSize] = key < seq ? k_head[at] : 0.0f;
      v_tile[i / HeadSize][i % HeadSize] = key < seq ? v_head[at] : 0.0f;
    }
    __syncthreads();

    // Scores of this row against the tile; every thread reads the same k_tile element (a broadcast).
    // The loops over keys unroll 4 ways, not fully: fully unrolled (64 keys x 64 dims) ptxas took 3 minutes
    // per architecture on the CI machine and held all 64 scores in registers; query and acc stay in registers.
    float scores[kKeysPerTile];
    float tile_max = -INFINITY;
#pragma unroll 4
    for (int j = 0; j < kKeysPerTile; ++j) {
      float s = 0.0f;
#pragma unroll
      for (int d = 0; d < HeadSize; ++d) s += query[d] * k_tile[j][d];
      const bool visible = k0 + j <= row && k0 + j < seq;
      scores[j] = visible ? s : -INFINITY;
      tile_max = fmaxf(tile_max, scores[j]);
    }
    // Key k0 = 0 is visible to every row, so after the first tile row_max is finite.
    const float new_max = fmaxf(row_max, tile_max);
    const float rescale = expf(row_max - new_max);  // 0 on the first tile: exp(-inf)
    row_sum *= rescale;
#pragma unroll
    for (int d = 0; d < HeadSize; ++d) acc[d] *= rescale;
#pragma unroll 4
    for (int j = 0; j < kKeysPerTile; ++j) {
      const float p = expf(scores[j] - new_max);  // masked: exp(-inf) = 0
      row_sum += p;
#pragma unroll
      for (int d = 0; d < HeadSize; ++d) acc[d] += p * v_tile[j][d];
    }
    row_max = new_max;
    __syncthreads();  // the next tile overwrites shared memory
  }

  if (active) {
    const float inverse = 1.0f / row_sum;
    for (int d = 0; d < HeadSize; ++d) out[head_offset + static_cast<size_t>(row) * HeadSize + d] = acc[d] * inverse;
    lse[(static_cast<size_t>(blockIdx.z) * gridDim.y + blockIdx.y) * seq + row] = row_max + logf(row_sum);
  }
}

template <int HeadSize>
void launch(const float* q, const float* k, const float* v, float* out, float* lse, int64_t batch, int64_t heads,
            int64_t seq) {
  const dim3 grid(static_cast<unsigned>((seq + kRowsPerBlock - 1) / kRowsPerBlock), static_cast<unsigned>(heads),
                  static_cast<unsigned>(batch));
  const float scale = 1.0f / std::sqrt(static_cast<float>(HeadSize));
  flash_forward_kernel<HeadSize><<<grid, kRowsPerBlock>>>(q, k, v, out, lse, static_cast<int>(seq), scale);
}

}  // namespace

void flash_attention_forward(const float* q, const float* k, const float* v, float* out, float* lse, int64_t batch,
                             int64_t heads, int64_t seq, int64_t head_size) {
  if (batch < 1 || heads < 1 || seq < 1) throw std::invalid_argument("flash_attention_forward: empty input");
  if (batch > 65535 || heads > 65535 || seq > (1 << 30)) {
    throw std::invalid_argument("flash_attention_forward: batch and heads at most 65535, seq at most 2^30");
  }
  switch (head_size) {
    case 32:
      launch<32>(q, k, v, out, lse, batch, heads, seq);
      break;
    case 64:
      launch<64>(q, k, v, out, lse, batch, heads, seq);
      break;
    default:
      throw std::invalid_argument("flash_attention_forward: head_size " + std::to_string(head_size) +
                                  " has no kernel (32 or 64)");
  }
  SPEEDLABS_CUDA_CHECK(cudaGetLastError());  // a bad launch configuration shows here
}

}  // namespace lab09::cuda
