/// @file labs/04_measure/exercise.h
/// @brief Lab 04 exercise: a timing function that tells the truth.
///
/// Stubs live in labs/04_measure/exercise.cpp, the reference in solutions/04_measure/exercise.cpp.
#pragma once
#include <c10/core/Device.h>

#include <functional>

#include "common/device.h"
#include "common/timer.h"

namespace lab04 {

/// Where timed work runs, as measure() sees it: a device that may still be working after the call
/// that gave it the work has returned, and that can be waited for.
///
/// A CUDA GPU is like this (a kernel launch only queues the kernel); so is the tests' stand-in, whose
/// work runs on a worker thread, which is how the tests catch a measure() that forgets to wait on a
/// machine without a GPU.
class AsyncDevice {
 public:
  virtual ~AsyncDevice() = default;
  /// Blocks until all work given to this device so far has finished.
  virtual void synchronize() = 0;
};

/// A libtorch device, the CPU or a CUDA GPU, as an AsyncDevice.
class TorchDevice final : public AsyncDevice {
 public:
  /// Wraps @p device.
  explicit TorchDevice(c10::Device device) : device_(device) {}
  /// speedlabs::synchronize(): waits for the GPU's queued work; on the CPU there is nothing to wait for.
  void synchronize() override { speedlabs::synchronize(device_); }

 private:
  c10::Device device_;
};

/// Times @p fn on @p device the way the lesson asks: warm-up calls first (made, timed, but left out
/// of the statistics), then @p options.repeats measured calls, each read from a steady host clock
/// with the device synchronized before starting the clock and again before stopping it, and
/// finally the median, min and max of the measured calls.
///
/// Why each part: the first calls pay for loading, allocation and caches; device work is queued and
/// the call returns at once, so a clock read without synchronizing times the queuing, not the work;
/// work queued before the clock starts must not be billed to this call; one slow outlier (another
/// process, a page fault) moves a mean but not a median.
/// Write it with device.synchronize() and speedlabs::summarize() (common/timer.h).
/// @param fn       the work to time; called warmup + repeats times
/// @param device   where fn's work runs: synchronize it around every timed call
/// @param options  how many warm-up and measured calls
/// @return         first_ms (the very first call, warm-up or not), samples_ms (the measured calls, in
///                 order), median_ms, min_ms and max_ms of the samples
/// @throws speedlabs::UsageError when options.repeats < 1 or options.warmup < 0
speedlabs::TimingStats measure(const std::function<void()>& fn, AsyncDevice& device, speedlabs::TimingOptions options);

/// Two sides of a comparison, timed interleaved.
struct PairTiming {
  speedlabs::TimingStats a;  ///< side A's measured calls, in order (first_ms: A's very first call)
  speedlabs::TimingStats b;  ///< side B's, likewise
  speedlabs::Summary ratio;  ///< A's time over B's within each round, summarised over the rounds
};

/// Times @p fn_a against @p fn_b so that both see the same machine: @p options.warmup warm-up rounds, then
/// @p options.repeats measured rounds; each round times A once and B once, each call synchronized like a
/// measure() call, in the order A, B in even rounds and B, A in odd ones (counting the warm-up rounds).
///
/// Why: a comparison timed one side after the other (all of A, then all of B) lets anything that changes
/// meanwhile (another program starting, a CPU clocking down) land on one side only and pass for a
/// difference between them. Taken within a round, the two times saw the same moment, so the ratio keeps
/// what the sides differ by and drops what the machine did. Alternating the order shares out whatever one
/// call leaves to the next (caches, clocks).
/// @return the two sides' statistics (speedlabs::summarize) and the per-round ratio A/B
///         (speedlabs::summarize_samples)
/// @throws speedlabs::UsageError when options.repeats < 1 or options.warmup < 0
PairTiming measure_pair(const std::function<void()>& fn_a, const std::function<void()>& fn_b, AsyncDevice& device,
                        speedlabs::TimingOptions options);

}  // namespace lab04
