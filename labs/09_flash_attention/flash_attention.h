/// @file labs/09_flash_attention/flash_attention.h
/// @brief Lab 09's optional GPU exercise: the tiled causal attention forward as a CUDA kernel, behind a plain
/// C++ interface.
///
/// This header needs no CUDA headers. The kernel (flash_attention.cu: the stub in labs/09_flash_attention/, the
/// reference in solutions/09_flash_attention/) is compiled only where nvcc is found (the lab's CUDA_KERNEL in
/// cmake/SpeedLab.cmake); everything that links it then sees SPEEDLABS_LAB09_CUDA_KERNEL.
#pragma once
#include <cstdint>

namespace lab09::cuda {

/// Causal attention forward on the GPU: one thread block per (batch, head, block of query rows). The block
/// keeps its queries, running maxima, sums and outputs in registers and walks the key/value tiles up to the
/// diagonal, staging each tile in shared memory; the scores exist only one tile at a time.
///
/// All pointers are device pointers to contiguous float32 arrays. The launch goes on the default stream
/// (libtorch's current stream unless the caller changed it) and returns without waiting for it.
/// @param q,k,v      (batch, heads, seq, head_size)
/// @param out        receives (batch, heads, seq, head_size): softmax(q k^T / sqrt(head_size) + mask) v
/// @param lse        receives (batch, heads, seq): the log-sum-exp of each row's scaled, masked scores
/// @param batch      B (at least 1)
/// @param heads      n_head (at least 1)
/// @param seq        T (at least 1)
/// @param head_size  32 or 64 (GPT-2's); larger would spill the per-thread arrays out of registers
/// @throws std::invalid_argument for sizes the kernel cannot take (the message says which it can); std::runtime_error
/// when the launch fails;
///         speedlabs::NotImplementedError from the stub
void flash_attention_forward(const float* q, const float* k, const float* v, float* out, float* lse, int64_t batch,
                             int64_t heads, int64_t seq, int64_t head_size);

}  // namespace lab09::cuda
