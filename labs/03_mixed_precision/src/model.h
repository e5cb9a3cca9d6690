/// @file labs/03_mixed_precision/src/model.h
/// @brief Lab 03's model. Apart from experiment.h, so that the program's main() and the tests, which never
/// build it, compile without the nn modules.
#pragma once
#include <torch/nn/modules/container/sequential.h>

#include "experiment.h"

namespace lab03 {

/// The lab's MLP (16 -> hidden -> hidden -> 1, tanh), with the same initial weights for every run of one seed.
/// @param config  hidden, seed and device
/// @return        the model, on the config's device
torch::nn::Sequential make_model(const Config& config);

}  // namespace lab03
