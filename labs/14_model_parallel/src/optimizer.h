/// @file labs/14_model_parallel/src/optimizer.h
/// @brief The optimizer of every lab 14 job. Apart from worker.h, so that the program's main() and the
/// launcher, which never train, compile without the optimizers.
#pragma once
#include <torch/torch.h>

#include <vector>

namespace lab14 {

/// The optimizer every job uses, on @p params: AdamW as common/gpt's make_adamw sets it.
/// @param params the parameters this worker updates
/// @param lr     the learning rate
torch::optim::AdamW make_optimizer(const std::vector<torch::Tensor>& params, double lr);

}  // namespace lab14
