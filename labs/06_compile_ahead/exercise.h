/// @file labs/06_compile_ahead/exercise.h
/// @brief Lab 06 exercise: AdamW over every parameter at once (Python's foreach form and the fused
/// kernel), and the training step captured in a CUDA graph.
///
/// The stubs are in labs/06_compile_ahead/exercise.cpp. The ladder's rungs run your optimizers (through
/// ForeachAdamW and FusedAdamW, optimizers.h), your lab 05 train_step and attention, and on a GPU your
/// capture. Check your work with `./lab check 06`.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <vector>

#ifdef SPEEDLABS_TORCH_HAS_CUDA
#include <ATen/cuda/CUDAGraph.h>
#endif

namespace lab06 {

/// AdamW's constants (PyTorch's defaults, the chapter's optimizer).
struct AdamWHyperparameters {
  double beta1 = 0.9;          ///< decay of the running mean of the gradients
  double beta2 = 0.999;        ///< decay of the running mean of the squared gradients
  double eps = 1e-8;           ///< added to the root of the second moment
  double weight_decay = 0.01;  ///< decoupled weight decay, scaled by the learning rate
};

/// The tensors one multi-tensor AdamW step reads and writes, one entry per parameter.
struct AdamWTensors {
  std::vector<torch::Tensor> params;       ///< the weights, updated in place
  std::vector<torch::Tensor> grads;        ///< their gradients (read)
  std::vector<torch::Tensor> exp_avgs;     ///< first moments, updated in place
  std::vector<torch::Tensor> exp_avg_sqs;  ///< second moments, updated in place
  std::vector<torch::Tensor> steps;        ///< float32 0-dim step counts, one per parameter, updated in place
};

/// One AdamW step over every parameter at once, with the op sequence of Python's
/// torch.optim.AdamW(foreach=True) when it is not capturable: each line of the formula is one _foreach_
/// op over all the tensors (one multi-tensor kernel on a GPU, about ten per step instead of ten per
/// parameter). The step counts are CPU tensors, so the bias corrections are computed on the host without
/// waiting for the device.
///
/// With t the new step count and lr the learning rate, for every parameter p with gradient g:
///   p *= 1 - lr * weight_decay;  m = lerp(m, g, 1 - beta1);  v = beta2 v + (1 - beta2) g g;
///   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
/// @param tensors the parameters, gradients and state (equal lengths); the step counts on the CPU
/// @param lr      the learning rate
/// @param hyper   the constants
void foreach_adamw_update(AdamWTensors& tensors, double lr, const AdamWHyperparameters& hyper);

/// One AdamW step over every parameter at once, without a single host-device synchronization:
/// add 1 to every step count (one foreach kernel), then at::_fused_adamw_ with the learning rate as a
/// device tensor. Because nothing is read back to the host and every number the step uses lives in
/// device memory, the step can be captured in a CUDA graph and replayed, and the learning rate can be
/// changed between replays by writing into @p lr.
/// @param tensors the parameters, gradients and state (equal lengths); the step counts on the parameters' device
/// @param lr      the learning rate: a float32 0-dim tensor on the parameters' device
/// @param hyper   the constants
void fused_adamw_update(AdamWTensors& tensors, const torch::Tensor& lr, const AdamWHyperparameters& hyper);

#ifdef SPEEDLABS_TORCH_HAS_CUDA
/// Records one training step into @p graph (recorded, not run), so that graph.replay() later launches
/// every kernel of the forward pass, backward pass and optimizer step in one call.
///
/// The caller has made a side stream current (capture never works on the legacy default stream), run a
/// few eager steps on it first (cuBLAS handles, autocast caches and lazily built state must exist before
/// the capture), and keeps the step's inputs at fixed addresses. Before the capture the optimizer's
/// gradients are set to none, so that the captured backward allocates them from the graph's own memory.
/// When @p step throws (an op that cannot be captured, such as a read back to the host), the capture is
/// ended before the error goes on, so that the stream and the caching allocator are usable again.
/// @param graph      an empty graph
/// @param step       one training step on the fixed inputs (e.g. lab05::train_step), returning its loss
/// @param optimizer  the optimizer @p step uses
/// @return the loss tensor of the recorded step: every replay writes the new loss into it
torch::Tensor capture_train_step(at::cuda::CUDAGraph& graph, const std::function<torch::Tensor()>& step,
                                 torch::optim::Optimizer& optimizer);
#endif

}  // namespace lab06
