/// @file labs/03_mixed_precision/src/probes.h
/// @brief Lab 03: one probe per op of chapter 9 section 5, the call that runs it on made-up inputs.
#pragma once
#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

namespace lab03 {

/// Makes a probe's floating-point inputs: the first in `first`, the rest in `rest`, values in (0.1, 0.9)
/// so that log, acos, erfinv and friends stay finite.
struct ProbeInputs {
  c10::ScalarType first;  ///< dtype of the first floating-point input
  c10::ScalarType rest;   ///< dtype of every later one
  c10::Device device;     ///< where the inputs are made
  int made = 0;           ///< floating-point inputs made so far

  /// The dtype of the next input: `first` once, then `rest`.
  c10::ScalarType next_dtype() { return made++ == 0 ? first : rest; }
  /// A floating-point input of @p shape, values in (0.1, 0.9).
  /// @param shape  the tensor's shape
  torch::Tensor operator()(at::IntArrayRef shape) {
    const auto dtype = next_dtype();
    return (torch::rand(shape, torch::dtype(torch::kFloat32).device(device)) * 0.8 + 0.1).to(dtype);
  }
  /// A float tensor of ones (targets of the +-1 losses).
  /// @param shape  the tensor's shape
  torch::Tensor ones(at::IntArrayRef shape) { return torch::ones(shape, torch::dtype(next_dtype()).device(device)); }
  /// An integer tensor (class targets, indices); not floating point, so autocast never casts it.
  /// @param values  its elements, row-major
  /// @param shape   its shape
  torch::Tensor longs(std::vector<int64_t> values, at::IntArrayRef shape) {
    return torch::tensor(values, torch::dtype(torch::kLong)).reshape(shape).to(device);
  }
};

/// One op of the chapter: its name and list, the C++ call that runs it, the aten op whose AutocastCPU rule
/// decides it on the CPU ("" none), a note, and the call itself.
struct OpProbe {
  std::string op;              ///< the chapter's name, e.g. "__matmul__", "GRUCell"
  std::string chapter_policy;  ///< the chapter's list: "lower", "float32" or "widest"
  std::string call;            ///< the C++ call that runs it
  std::string cpu_rule;        ///< the aten op whose AutocastCPU rule decides it on the CPU ("" none)
  std::string note;            ///< how the C++ call relates to the Python name, or why the CPU differs
  std::function<torch::Tensor(ProbeInputs&)> run;  ///< runs the op on inputs it asks for
};

/// Every op of the chapter's three lists, in the chapter's order: eligible for low precision, autocast to
/// float32, promote to the widest input type.
std::vector<OpProbe> chapter_probes();

/// Ops on none of autocast's lists, CUDA's or the CPU's (add, mul, relu, gelu, tanh, sigmoid, masked_fill):
/// the chapter says such an op runs in its inputs' dtype. Their chapter_policy is "inputs" and their
/// cpu_rule names the aten op, so the dispatcher can confirm it has no AutocastCPU kernel.
std::vector<OpProbe> unlisted_probes();

}  // namespace lab03
