/// @file labs/08_memory/exercise.h
/// @brief Lab 08 exercise: activation checkpointing of one transformer block, as a torch::autograd::Function.
///
/// Stubs live in labs/08_memory/exercise.cpp, the reference in solutions/08_memory/exercise.cpp.
#pragma once
#include <torch/torch.h>

#include <functional>

namespace lab08 {

/// A block of the model as a function of its input: x (B, T, C) -> (B, T, C). Its parameters are
/// reached by the function itself (a lambda around a module), not passed as inputs.
using BlockFn = std::function<torch::Tensor(const torch::Tensor& x)>;

/// Runs @p block on @p x with activation checkpointing: the same output as block(x), but the block's
/// intermediate activations are not kept for the backward pass. Only @p x is saved; during backward
/// the block's forward runs again (with gradients on) and is backpropagated at once, so its
/// activations live only while its own backward runs.
///
/// What makes the recomputation the same computation as the forward:
/// - autocast: it runs under the autocast state (enabled flag and dtype of @p x's device type) that
///   was current in the forward, whatever the state is when backward runs;
/// - randomness: it runs from the random-number state of the forward (the CPU generator, and the
///   CUDA generator of @p x's device when @p x is on a GPU), so a dropout draws the same mask; the
///   generator is put back afterwards, so the rest of the program does not see the replay.
///
/// The block's parameters receive their gradients (accumulated into .grad) during that inner
/// backward. The output requires grad when @p x does (as in a transformer, where x comes from the
/// embeddings); when @p x does not, nothing is recomputed and the parameters get no gradient.
/// @param block the block to run (called once in forward and once more in backward)
/// @param x     its input
/// @return block(x), computed without recording the block's graph
torch::Tensor checkpointed_block(const BlockFn& block, const torch::Tensor& x);

}  // namespace lab08
