// Lab 08 exercise, the reference answer: activation checkpointing as a torch::autograd::Function.
#include "exercise.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>

#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "common/autocast_guard.h"

namespace lab08 {

namespace {

// The block travels to backward inside the context's saved data, which holds IValues: a capsule
// carries any C++ object there.
struct BlockHolder : torch::CustomClassHolder {
  explicit BlockHolder(BlockFn fn) : block(std::move(fn)) {}
  BlockFn block;
};

// The default generators the block may draw from: the CPU's, and the GPU's when x lives on one.
std::vector<at::Generator> generators_of(const torch::Tensor& x) {
  std::vector<at::Generator> generators{at::globalContext().defaultGenerator(c10::kCPU)};
  if (!x.device().is_cpu()) generators.push_back(at::globalContext().defaultGenerator(x.device()));
  return generators;
}

std::vector<torch::Tensor> get_states(std::vector<at::Generator>& generators) {
  std::vector<torch::Tensor> states;
  for (auto& generator : generators) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    states.push_back(generator.get_state());
  }
  return states;
}

void set_states(std::vector<at::Generator>& generators, const std::vector<torch::Tensor>& states) {
  for (size_t i = 0; i < generators.size(); ++i) {
    std::lock_guard<std::mutex> lock(generators[i].mutex());
    generators[i].set_state(states[i]);
  }
}

struct CheckpointedBlock : torch::autograd::Function<CheckpointedBlock> {
  // Runs with gradients off (the Function machinery turns them off), so the block records no graph
  // and its intermediate tensors are freed as soon as the block is done with them.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const BlockFn& block) {
    const c10::DeviceType type = x.device().type();
    ctx->saved_data["block"] = c10::IValue::make_capsule(c10::make_intrusive<BlockHolder>(block));
    ctx->saved_data["autocast_enabled"] = at::autocast::is_autocast_enabled(type);
    ctx->saved_data["autocast_dtype"] = at::autocast::get_autocast_dtype(type);
    auto generators = generators_of(x);
    ctx->saved_data["rng_states"] = c10::List<torch::Tensor>(get_states(generators));
    ctx->save_for_backward({x});
    return block(x);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad_outputs) {
    const torch::Tensor input = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    const auto holder = ctx->saved_data["block"].toCapsule();
    const BlockFn& block = static_cast<BlockHolder*>(holder.get())->block;

    // Replay the forward's randomness, then give the program back the generators as they were.
    auto generators = generators_of(input);
    const std::vector<torch::Tensor> now = get_states(generators);
    set_states(generators, ctx->saved_data["rng_states"].toTensorVector());
    torch::Tensor output;
    {
      const speedlabs::AutocastGuard autocast(input.device().type(), ctx->saved_data["autocast_dtype"].toScalarType(),
                                              ctx->saved_data["autocast_enabled"].toBool());
      const torch::AutoGradMode grad_on(true);
      output = block(input);
    }
    set_states(generators, now);

    // Backpropagate through the recomputed block now: its parameters get their gradients, and the
    // recomputed activations are freed when this returns.
    torch::autograd::backward({output}, {grad_outputs[0]});
    return {input.grad(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor checkpointed_block(const BlockFn& block, const torch::Tensor& x) {
  return CheckpointedBlock::apply(x, block);
}

}  // namespace lab08
