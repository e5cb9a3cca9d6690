// Lab 08 exercise stubs: replace the body, then check your work with ./lab check 08 (see README.md).
#include "exercise.h"

#include "common/errors.h"

namespace lab08 {

// TODO(lab08): activation checkpointing of one block.
//
// Why: a transformer block keeps about 19 of its (B, T, C) tensors alive from its forward to its
// backward (README.md, "The step, phase by phase"). Checkpointing keeps only the block's input and
// runs the block's forward a second time during backward, trading one more forward for that memory.
// libtorch has no torch.utils.checkpoint, so write it as a custom autograd function:
//
//   struct CheckpointedBlock : torch::autograd::Function<CheckpointedBlock> {
//     static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
//                                  const BlockFn& block);
//     static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
//                                                  torch::autograd::tensor_list grad_outputs);
//   };
//   ... return CheckpointedBlock::apply(x, block);
//
// Hints:
// - forward already runs with gradients off: block(x) there records no graph. Save x with
//   ctx->save_for_backward({x}); keep everything else in ctx->saved_data (IValues). The block itself
//   fits in an IValue as a capsule: c10::IValue::make_capsule(c10::make_intrusive<Holder>(block))
//   with `struct Holder : torch::CustomClassHolder { BlockFn block; }`, back with toCapsule().
// - The same computation twice: in forward remember at::autocast::is_autocast_enabled(type) and
//   at::autocast::get_autocast_dtype(type) for x's device type, and the state of the random
//   generators (at::globalContext().defaultGenerator(device).get_state(), under generator.mutex()):
//   the CPU's always, x's device's too when it is not the CPU. In backward, set those states, recompute
//   under speedlabs::AutocastGuard (common/autocast_guard.h; enabled=false works too) and
//   torch::AutoGradMode(true), then put the generators back as they were before the replay.
// - Recompute from x.detach().requires_grad_(true), call torch::autograd::backward({output},
//   {grad_outputs[0]}) (the parameters' .grad fill up here), and return {input.grad(), torch::Tensor()}:
//   one gradient per forward argument, none for the block.
torch::Tensor checkpointed_block(const BlockFn& /*block*/, const torch::Tensor& /*x*/) {
  speedlabs::not_implemented("08", "08_memory", "checkpointed_block");
}

}  // namespace lab08
