// The precompiled header of the units that use tensors but none of libtorch's nn, optim or autograd-function
// headers. An empty unit that reads it compiles in about 2 s, one that reads common/pch_torch.h in about 5 s
// (quiet 2-core VM).
#pragma once
#include <torch/types.h>
#include <torch/utils.h>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
