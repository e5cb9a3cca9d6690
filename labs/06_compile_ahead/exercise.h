/// @file labs/06_compile_ahead/exercise.h
/// @brief Lab 06 exercise: the padded vocabulary and the fused AdamW update with its state on the device.
///
/// Stubs live in labs/06_compile_ahead/exercise.cpp, the reference in solutions/06_compile_ahead/exercise.cpp.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace lab06 {

/// The smallest multiple of @p multiple that is at least @p vocab_size: GPT-2's 50,257 tokens padded to
/// a multiple of 128 give 50,304 (= 2^7 * 393), a width the matrix-multiply kernels tile without a ragged edge.
/// Throws speedlabs::UsageError when either argument is not positive.
/// @param vocab_size the real number of tokens
/// @param multiple   the tile width to round up to
int64_t padded_vocab_size(int64_t vocab_size, int64_t multiple);

/// AdamW's constants (PyTorch's defaults, the chapter's optimizer).
struct AdamWHyperparameters {
  double beta1 = 0.9;           ///< decay of the running mean of the gradients
  double beta2 = 0.999;         ///< decay of the running mean of the squared gradients
  double eps = 1e-8;            ///< added to the root of the second moment
  double weight_decay = 0.01;   ///< decoupled weight decay, scaled by the learning rate
};

/// The tensors one fused AdamW step reads and writes, one entry per parameter, all on the parameters' device.
struct FusedAdamWTensors {
  std::vector<torch::Tensor> params;       ///< the weights, updated in place
  std::vector<torch::Tensor> grads;        ///< their gradients (read)
  std::vector<torch::Tensor> exp_avgs;     ///< first moments, updated in place
  std::vector<torch::Tensor> exp_avg_sqs;  ///< second moments, updated in place
  std::vector<torch::Tensor> steps;        ///< float32 0-dim step counts, one per parameter, on the device
};

/// One AdamW step over every parameter at once, without a single host-device synchronization:
/// add 1 to every step count (one foreach kernel), then at::_fused_adamw_ with the learning rate as a
/// device tensor. Because nothing is read back to the host and every number the step uses lives in
/// device memory, the step can be captured in a CUDA graph and replayed, and the learning rate can be
/// changed between replays by writing into @p lr.
/// @param tensors the parameters, gradients and state (the lists have equal lengths)
/// @param lr      the learning rate: a float32 0-dim tensor on the parameters' device
/// @param hyper   the constants
void fused_adamw_update(FusedAdamWTensors& tensors, const torch::Tensor& lr, const AdamWHyperparameters& hyper);

}  // namespace lab06
