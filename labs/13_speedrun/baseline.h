/// @file labs/13_speedrun/baseline.h
/// @brief The speedrun's fixed baseline: plain float32 AdamW at a constant learning rate, attention written out.
/// It is the lab's, not the student's: every score is a time measured against it in the same run.
#pragma once
#include <torch/types.h>

#include <memory>

#include "common/gpt.h"
#include "exercise.h"

namespace lab13 {

/// The baseline trainer (the recipe of the stub in labs/13_speedrun/exercise.cpp).
std::unique_ptr<Trainer> make_baseline_trainer();

/// Attention as lab 05 writes it: the whole (T, T) score matrix, masked, softmaxed (the baseline's).
/// q, k, v: (B, heads, T, head size); returns the same shape.
torch::Tensor written_out_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

/// Every parameter of @p model, detached, named as its named_parameters(): what Trainer::weights() hands back.
speedlabs::gpt::NamedTensors weights_of(const speedlabs::gpt::GPT& model);

}  // namespace lab13
