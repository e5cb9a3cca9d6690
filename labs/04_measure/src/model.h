/// @file labs/04_measure/src/model.h
/// @brief Lab 04's model. Apart from experiment.h, so that the program's main() and the tests, which never
/// build it, compile without the nn modules.
#pragma once
#include <torch/nn/modules/container/sequential.h>

#include <cstdint>

namespace lab04 {

/// The lesson's model: Linear(512, 2048), GELU, Linear(2048, 512), initialised from @p seed.
torch::nn::Sequential make_model(uint64_t seed);

}  // namespace lab04
