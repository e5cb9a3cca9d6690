/// @file labs/06_compile_ahead/src/optimizers.h
/// @brief Lab 06: AdamW over every parameter at once, the way Python's torch.optim.AdamW runs on a GPU
/// (foreach) and its single-kernel form (fused).
///
/// libtorch's torch::optim::AdamW updates one parameter at a time: about ten small kernels for each of
/// GPT-2's 148 tensors, some 1,500 launches per step. Python's AdamW on CUDA defaults to the foreach form
/// instead, so a C++ ladder built on the per-tensor optimizer would lose to Python for a reason that has
/// nothing to do with C++. Both classes here keep their state in flat lists and update all parameters
/// with multi-tensor kernels.
#pragma once
#include <torch/torch.h>

#include <vector>

#include "exercise.h"

namespace lab06 {

/// What the two multi-tensor AdamW optimizers share: the parameters, their moments and step counts in
/// flat lists, and the choice of the parameters that take part in a step.
class MultiTensorAdamW : public torch::optim::Optimizer {
 public:
  /// The per-parameter step counts (float32 0-dim tensors; where they live depends on the form).
  const std::vector<torch::Tensor>& step_counts() const { return state_.steps; }

 protected:
  /// @param params       the parameters (all on one device; at least one)
  /// @param lr           the learning rate
  /// @param hyper        the other constants
  /// @param steps_device where the step counts live
  MultiTensorAdamW(std::vector<torch::Tensor> params, double lr, AdamWHyperparameters hyper,
                   const c10::Device& steps_device);
  /// The tensors of the parameters that have a gradient; the others sit the step out with their state,
  /// as in torch.optim. Throws speedlabs::UsageError when @p closure is set (these steps take none).
  /// @param closure what step() was given
  AdamWTensors active(const LossClosure& closure) const;

  AdamWHyperparameters hyper_;  ///< beta1, beta2, eps, weight decay

 private:
  AdamWTensors state_;
};

/// torch.optim.AdamW(foreach=True), the default for CUDA parameters: an optimizer whose step is
/// foreach_adamw_update() (about ten multi-tensor kernels per step). The step counts live on the CPU and
/// the bias corrections are computed on the host, exactly as Python does when the optimizer is not
/// capturable; so the step cannot be captured in a CUDA graph, but it never waits for the device.
class ForeachAdamW : public MultiTensorAdamW {
 public:
  /// @param params the parameters (all on one device; at least one)
  /// @param lr     the learning rate
  /// @param hyper  the other constants
  ForeachAdamW(std::vector<torch::Tensor> params, double lr, AdamWHyperparameters hyper = {});
  /// One step over every parameter that has a gradient. @param closure must be empty
  torch::Tensor step(LossClosure closure = nullptr) override;

 private:
  double lr_;
};

/// An optimizer whose step is fused_adamw_update(): AdamW with its moments, step counts and learning
/// rate all in device memory, so that a step queues kernels and never waits for the device, and can be
/// captured in a CUDA graph.
class FusedAdamW : public MultiTensorAdamW {
 public:
  /// @param params the parameters (all on one device; at least one)
  /// @param lr     the learning rate
  /// @param hyper  the other constants
  FusedAdamW(std::vector<torch::Tensor> params, double lr, AdamWHyperparameters hyper = {});
  /// One fused step over every parameter that has a gradient. @param closure must be empty
  torch::Tensor step(LossClosure closure = nullptr) override;
  /// Writes a new learning rate into the device tensor (a captured graph picks it up on its next replay).
  /// @param lr the learning rate
  void set_lr(double lr);

 private:
  torch::Tensor lr_;
};

}  // namespace lab06
