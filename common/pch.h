// The precompiled header every target reuses: libtorch is by far the most expensive include.
#pragma once
#include <torch/torch.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
