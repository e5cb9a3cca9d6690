/// @file labs/07_profile/src/trace.h
/// @brief One GPT-2 training step under libtorch's Kineto profiler, from C++: named ranges, the trace
/// file, and the ops ranked by their self time.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/gpt.h"

namespace lab07 {

/// The named ranges of a step, as they appear in the trace (RECORD_USER_SCOPE).
inline const std::vector<std::string>& step_ranges() {
  static const std::vector<std::string> names{"forward", "backward", "optimizer"};
  return names;
}

/// One training step: forward and cross-entropy loss, backward, AdamW step, gradients zeroed, each part
/// inside a named profiler range. Kept minimal on purpose (lab 05's step adds the precision modes).
/// @param model     the model
/// @param optimizer its AdamW
/// @param x         (B, T) input ids on the model's device
/// @param y         (B, T) target ids on the model's device
/// @return the loss, detached (a 0-dim tensor on the device)
torch::Tensor ranged_train_step(speedlabs::gpt::GPT& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x,
                                const torch::Tensor& y);

/// One op name's share of the profiled step.
struct OpTime {
  std::string name;    ///< e.g. "aten::addmm"
  int64_t calls = 0;   ///< how often it ran in the step
  double self_ms = 0;  ///< time inside it but not inside an op it called, summed over its calls
  double share = 0;    ///< self_ms / the step's time
};

/// One top-level op call of the profiled step (an aten op not inside another aten op), with what the shapes
/// of its inputs, and of the matmuls it called, say about its work.
struct TopLevelOp {
  std::string name;         ///< e.g. "aten::linear"
  std::string range;        ///< the named range it ran in ("data", "forward", ...; "" outside any)
  double ms = 0;            ///< its duration, the ops it called included
  double matmul_flops = 0;  ///< FLOPs of the matmuls it ran, from their shapes (0: no matmul inside)
  double bytes = 0;         ///< bytes it reads and writes, from its inputs' shapes (see tensor_bytes())
  bool metadata = false;    ///< only views and allocations inside: it moves no data
};

/// What one profiled step showed.
struct StepProfile {
  double step_ms = 0;                      ///< from the start of the first named range to the end of the last (host)
  std::map<std::string, double> range_ms;  ///< duration of each named range (host)
  std::map<std::string, int> range_count;  ///< how often each named range appears (1 each: no warm-up steps)
  std::vector<OpTime> ops;                 ///< every CPU op name, by self time, largest first
  int64_t op_calls = 0;                    ///< top-level op calls: aten ops not inside another aten op
  int64_t cuda_kernels = 0;                ///< GPU kernels in the trace (0 on a CPU)
  std::vector<OpTime> kernels;             ///< GPU kernels by time, largest first (share of step_ms)
  std::vector<TopLevelOp> top_level;       ///< every top-level op call on the host, in no particular order
  double loss = 0;                         ///< the profiled step's loss
  int64_t events = 0;  ///< host events the profiler recorded in the step, nested ones and ranges too
};

/// Profiles one call of @p step with the Kineto profiler (CPU activities, plus CUDA on a GPU), after
/// the caller's warm-up steps, and writes the Chrome/Perfetto trace to @p trace_path atomically when it
/// is not empty (saved to a temporary name in the same folder, then renamed).
/// @param step       runs one training step and returns its loss
/// @param device     the step's device (synchronized before the profiler stops)
/// @param trace_path where the trace JSON goes ("" = not written)
StepProfile profile_step(const std::function<torch::Tensor()>& step, const c10::Device& device,
                         const std::string& trace_path);

/// The profiler's own cost per event it records, in microseconds: a loop of tiny ops (a 1-element add, one
/// event each) timed with the profiler recording (shapes included, as profile_step() records) and without,
/// round after round; the median round's difference over the events recorded.
/// @param device where the ops run
/// @param rounds how many rounds of each
double measure_profiler_us_per_event(const c10::Device& device, int rounds);

}  // namespace lab07
