/// @file labs/14_model_parallel/src/tensor_parallel.h
/// @brief Megatron's tensor parallelism of a GPT block, on the exercise's column- and row-parallel layers:
/// attention split by heads (c_attn by columns, c_proj by rows), the MLP's c_fc by columns and c_proj by rows;
/// LayerNorms, embeddings and the row-parallel biases are whole on every worker.
#pragma once
#include <torch/types.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

#include "common/gpt.h"
#include "exercise.h"
#include "worker.h"

namespace speedlabs::workers {
struct Engine;
}

namespace lab14 {

/// column_parallel_forward / column_parallel_backward as one autograd function: the all-reduce happens in the
/// backward.
/// @param x      (..., in), the same on every worker
/// @param weight (out/N, in), a leaf that requires grad
/// @param bias   (out/N)
/// @param comm   the workers (kept by pointer until the backward ran)
torch::Tensor column_parallel(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                              Communicator& comm);
/// row_parallel_forward / row_parallel_backward as one autograd function: the all-reduce happens in the forward.
/// @param x_shard (..., in/N)
/// @param weight  (out, in/N)
/// @param bias    (out), the whole bias
/// @param comm    the workers
torch::Tensor row_parallel(const torch::Tensor& x_shard, const torch::Tensor& weight, const torch::Tensor& bias,
                           Communicator& comm);

/// One block on one worker: its slices of the four matrices, the whole LayerNorms and row-parallel biases.
struct TPBlock {
  torch::Tensor ln1_w;   ///< ln_1's weight, whole
  torch::Tensor ln1_b;   ///< ln_1's bias, whole
  torch::Tensor qkv_w;   ///< c_attn: rows of q, k and v for this worker's heads (3C/N, C)
  torch::Tensor qkv_b;   ///< c_attn's bias for those rows (3C/N)
  torch::Tensor proj_w;  ///< attn.c_proj: columns of those heads (C, C/N)
  torch::Tensor proj_b;  ///< attn.c_proj's bias, whole
  torch::Tensor ln2_w;   ///< ln_2's weight, whole
  torch::Tensor ln2_b;   ///< ln_2's bias, whole
  torch::Tensor fc_w;    ///< mlp.c_fc: rows (4C/N, C)
  torch::Tensor fc_b;    ///< mlp.c_fc's bias for those rows (4C/N)
  torch::Tensor out_w;   ///< mlp.c_proj: columns (C, 4C/N)
  torch::Tensor out_b;   ///< mlp.c_proj's bias, whole
};

/// A worker's part of the whole model.
struct TPModel {
  torch::Tensor wte;            ///< token embeddings, whole (the tied head too)
  torch::Tensor wpe;            ///< position embeddings, whole
  torch::Tensor lnf_w;          ///< ln_f's weight, whole
  torch::Tensor lnf_b;          ///< ln_f's bias, whole
  std::vector<TPBlock> blocks;  ///< one per block
  int64_t n_head = 0;           ///< heads in the whole model
  int workers = 1;              ///< N
  /// Every tensor this worker trains (leaves that require grad).
  std::vector<torch::Tensor> parameters() const;
};

/// This worker's part of @p model: copies of its slices (new memory) and of the whole tensors.
/// @param model   the whole model, the same on every worker
/// @param rank    this worker
/// @param workers N (divides n_head)
TPModel shard_model(speedlabs::gpt::GPT& model, int rank, int workers);

/// The elements of the split matrices and biases of one block, whole: c_attn 3C x C + 3C, attn.c_proj C x C,
/// c_fc 4C x C + 4C, mlp.c_proj 4C x C: 12 C^2 + 7 C. A worker holds 1/N of them.
/// @param n_embd C
int64_t split_elements_per_block(int64_t n_embd);

/// The mean cross-entropy of the batch through the tensor-parallel model (every worker computes the same).
/// @param model this worker's part
/// @param x     (B, T) token ids
/// @param y     (B, T) targets
/// @param comm  the tensor-parallel workers
torch::Tensor tp_loss(const TPModel& model, const torch::Tensor& x, const torch::Tensor& y, Communicator& comm);

/// A TP job's work on one worker: job.steps AdamW steps; returns the losses, the bytes sent per step and the
/// bytes of the split matrices this worker allocated (counted by the counting allocator).
/// @param job    the job
/// @param engine the workers
nlohmann::json train_tensor_parallel(const Job& job, speedlabs::workers::Engine& engine);

}  // namespace lab14
