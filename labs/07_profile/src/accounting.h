/// @file labs/07_profile/src/accounting.h
/// @brief Where one training step's time goes, accounted in full: the matmuls (FLOPs from their shapes,
/// against the measured matmul peak), the memory-bound ops (bytes from their shapes, against the measured
/// bandwidth), the host's per-op overhead, the optimizer, the data loading and the idle time, summed and
/// held against the step timed without the profiler; and the step's model FLOP utilisation against the
/// measured and the theoretical peak.
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/observations.h"
#include "common/peaks.h"
#include "common/roofline.h"
#include "common/timer.h"
#include "trace.h"

namespace lab07 {

/// FLOPs of one call of a matmul op, from its input shapes: 2 m k n for mm and addmm, 2 b m k n for bmm and
/// baddbmm, 4 B H T S D for a fused attention kernel (QK^T and PV over the full T x S, causal or not) and 8 B H
/// T S D for its backward; 0 for any other op (linear and matmul count through the mm they call).
/// @param name   the op, e.g. "aten::addmm"
/// @param shapes its inputs' shapes, as the profiler records them
double matmul_flops_of(const std::string& name, const std::vector<std::vector<int64_t>>& shapes);

/// The bytes one call of a memory-bound op moves, from its inputs: every tensor input read once, and one
/// output as large as the largest input written (exact for an elementwise op; more than a reduction or a copy
/// moves). An embedding reads and writes only its looked-up rows.
/// @param name   the op
/// @param shapes its inputs' shapes
/// @param dtypes their types as the profiler names them ("float", "c10::BFloat16", "long int"; "Scalar" etc.
///               for arguments that are not tensors)
double tensor_bytes(const std::string& name, const std::vector<std::vector<int64_t>>& shapes,
                    const std::vector<std::string>& dtypes);

/// True for an op that only makes a view or allocates: it moves no data, so all of its time is host overhead.
/// @param name the op
bool is_metadata_op(const std::string& name);

/// One step's time in parts that add up to it.
struct StepAccount {
  double step_ms = 0;       ///< the profiled step, from the start of "data" to the end of "optimizer"
  double matmul_ms = 0;     ///< top-level ops that ran a matmul, in forward and backward, less their host overhead
  double matmul_flops = 0;  ///< the FLOPs of those matmuls, from their shapes
  double memory_ms = 0;     ///< every other op in forward and backward, less its host overhead
  double memory_bytes = 0;  ///< the bytes those ops move, from their shapes
  double overhead_ms = 0;   ///< the host's per-op cost x the top-level ops of forward and backward, plus views
  int64_t ops = 0;          ///< top-level ops in forward and backward
  double optimizer_ms = 0;  ///< the "optimizer" range: AdamW and zero_grad
  double data_ms = 0;       ///< the "data" range: the next batch, copied to the device
  double idle_ms = 0;       ///< inside the step but inside no op: the autograd engine, the glue between ops
  int64_t events = 0;       ///< the events the profiler recorded in the step
  double profiler_ms = 0;   ///< what recording them cost: events x the profiler's measured cost per event
  /// The parts' sum: the profiled step.
  double sum_ms() const { return matmul_ms + memory_ms + overhead_ms + optimizer_ms + data_ms + idle_ms; }
  /// The parts' sum less the profiler's own cost, spread through them: the step as it runs unobserved.
  double unobserved_ms() const { return sum_ms() - profiler_ms; }
};

/// Splits the profiled step into its parts. Each top-level op of forward and backward is charged
/// @p us_per_op of host overhead (all of its time when it only makes views), the rest of it goes to the
/// matmuls or to the memory-bound ops; idle is the step's time that no op and no data or optimizer range
/// covers.
/// @param profile   profile_step()'s result (its named ranges: data, forward, backward, optimizer)
/// @param us_per_op the C++ host cost of a tiny op, in microseconds
/// @param profiler_us_per_event the profiler's cost per event it records (measure_profiler_us_per_event())
StepAccount account_step(const StepProfile& profile, double us_per_op, double profiler_us_per_event);

/// Steps timed without the profiler and steps profiled, interleaved step by step, then taken in rounds: a block
/// of consecutive plain steps and the block of profiled steps made between them.
struct ProfiledRounds {
  int steps_per_round = 1;            ///< steps in each block, plain and profiled alike
  std::vector<StepProfile> profiles;  ///< steps_per_round profiled steps per round, in round order
  std::vector<double> plain_ms;       ///< each plain step's time, in round order
  std::vector<int64_t> plain_faults;  ///< each plain step's minor page faults (getrusage), in round order
  speedlabs::Interleaved timings;     ///< side 0: each plain step; side 1: each profiled one (with the profiler's cost)
  /// The plain steps, one sample per round (the median step of its block), with the machine's reading.
  speedlabs::TimingStats plain() const;
};

/// Runs @p rounds x @p steps_per_round plain steps (timed) and as many profiled steps (profile_step(), no
/// trace), one of each at a time in alternating order, so the profiled steps and the plain steps they are held
/// against saw the same moments; a round's block of steps evens out the scatter of single steps.
/// @param step            one training step
/// @param device          where it runs
/// @param rounds          how many rounds
/// @param steps_per_round the steps in each block
ProfiledRounds profile_rounds(const std::function<torch::Tensor()>& step, const c10::Device& device, int rounds,
                              int steps_per_round);

/// Records step_page_faults (reported): the plain steps' minor page faults, median and range, under the host
/// allocator's policy (@p allocator, keep_freed_host_memory()'s line); a step that keeps its freed buffers takes
/// almost none, one that hands them back faults every 4 KiB page of them in again.
/// @param rounds    the rounds whose plain steps were counted
/// @param allocator the host allocator's policy, in words
/// @param report    receives the observation
void observe_page_faults(const ProfiledRounds& rounds, const std::string& allocator, speedlabs::Report& report);

/// What the accounting is held against.
struct StepMeasures {
  speedlabs::TimingStats step;        ///< the steps timed without the profiler (ProfiledRounds::plain)
  speedlabs::MeasuredPeaks peaks;     ///< the measured roofs
  speedlabs::TheoreticalPeak theory;  ///< the theoretical float32 peak of this device
  double model_flops = 0;             ///< model FLOPs of one step (6 N + attention, x tokens)
};

/// Prints the parts and records step_time_accounted (must hold on a CPU: in each round, the median profiled step's
/// parts, less the profiler's own cost, sum to the median plain step timed beside them within 5%) and step_mfu
/// (reported: the model FLOP utilisation against the measured matmul peak and against the theoretical peak, every input
/// shown). Not applicable on a GPU: the host's timeline of an asynchronous step is not the device's.
/// @param accounts account_step() of each profiled step, in round order (measures.step's rounds, each a block)
/// @param measures what they are held against (measures.step: the same rounds' plain steps)
/// @param device   where the step ran
/// @param report   receives the observations
/// @return the round whose sum is the median (what the chart shows)
StepAccount observe_step_account(const std::vector<StepAccount>& accounts, const StepMeasures& measures,
                                 const c10::Device& device, speedlabs::Report& report);

/// Writes lab07_step.svg to @p plots_dir: the step as a stacked bar of its parts, beside the time its model
/// FLOPs would take at the measured matmul peak and at the theoretical peak (the two roofs).
/// @param account   the parts
/// @param measures  the roofs
/// @param plots_dir the folder
/// @param title     the chart's title
void plot_step_account(const StepAccount& account, const StepMeasures& measures, const std::string& plots_dir,
                       const std::string& title);

}  // namespace lab07
