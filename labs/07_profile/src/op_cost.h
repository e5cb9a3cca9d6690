/// @file labs/07_profile/src/op_cost.h
/// @brief The host cost of one op: a 1-element add and a small linear layer, timed in C++ and in Python
/// eager (a child process running labs/07_profile/src/op_cost.py with the .venv's torch).
#pragma once
#include <c10/core/Device.h>
#include "common/timer.h"

#include <optional>
#include <string>

namespace lab07 {

/// Microseconds per call of the two tiny ops.
struct OpCost {
  double add_us = 0;     ///< c = a + a, a of one float32 element
  double linear_us = 0;  ///< linear((8, 64) input, (64, 64) weight, bias)
  /// From C++: the repeats of both ops, timed in rounds side by side (ms per repeat of `calls` ops).
  speedlabs::Interleaved timings;
};

/// How to time the tiny ops.
struct OpCostOptions {
  int calls = 2000;  ///< ops per timed repeat (the per-op cost is repeat time / calls)
  int repeats = 7;   ///< timed repeats; the cost comes from their median
  int warmup = 2;    ///< repeats run and discarded first
};

/// Times the two tiny ops from C++ on @p device (the device synchronized around each repeat, not each op:
/// what is measured is the host's cost of issuing an op, or the device's when that is slower).
/// @param device  where the tensors live
/// @param options calls, repeats, warm-up
OpCost measure_op_cost_cpp(const c10::Device& device, const OpCostOptions& options);

/// The same measurement in Python eager: runs @p python on labs/07_profile/src/op_cost.py through
/// speedlabs::run_process with the same device, sizes and intra-op threads.
/// @param python  the Python interpreter with torch (SPEEDLABS_PYTHON)
/// @param device  where the tensors live
/// @param options calls, repeats, warm-up
/// @param failure set to why, when the child could not be run or printed no result
/// @return the costs, or nullopt with @p failure set
std::optional<OpCost> measure_op_cost_python(const std::string& python, const c10::Device& device,
                                             const OpCostOptions& options, std::string& failure);

}  // namespace lab07
