// The precompiled header of the units that use libtorch's nn, optim or autograd functions: all of
// <torch/torch.h>. CLI11 is left out: it costs 2 s in every unit that includes it, and only main()s use it.
#pragma once
#include <torch/torch.h>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
