/// @file labs/04_measure/src/measurement.h
/// @brief Lab 04's measuring tools: one benchmark variant timed with its peak memory, the evidence a time or
/// a ratio is decided from, and the rows of the table the run prints.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>

#include "common/observations.h"
#include "common/timer.h"

namespace lab04 {

/// Peak memory while one variant ran: resident memory on the CPU, the caching allocator on a GPU.
struct PeakMemory {
  nlohmann::json json;  ///< the numbers, for the observations
  std::string text;     ///< the same, for the table
};

/// Runs @p fn and reads the peak memory it reached on @p device.
PeakMemory with_peak_memory(const c10::Device& device, const std::function<void()>& fn);

/// One benchmark variant: the lesson's model on one device, in fp32 or under bf16 autocast.
struct Variant {
  std::string device;             ///< the device it ran on ("cpu", "cuda:0")
  std::string precision;          ///< "fp32" or "bf16" (autocast)
  int64_t batch = 0;              ///< rows of the input
  speedlabs::TimingStats timing;  ///< its times (lab04::measure() or one side of lab04::measure_pair())
  PeakMemory memory;              ///< its peak memory
  torch::Tensor output;           ///< the model's output, for the comparison of precisions
};

/// Times @p model on @p x (on x's device) with lab04::measure(), the exercise, under bf16 autocast when @p bf16.
Variant run_variant(torch::nn::Sequential& model, const torch::Tensor& x, bool bf16,
                    const speedlabs::TimingOptions& timing);

/// The median, min, max and first call of @p t, for the observations.
nlohmann::json timing_json(const speedlabs::TimingStats& t);

/// A time is decided from its samples and the machine's reading; a negative or reversed one is impossible.
speedlabs::Evidence timing_evidence(const speedlabs::TimingStats& t, const speedlabs::Contention& contention);

/// A ratio of two sides is decided from its per-round values.
speedlabs::Evidence ratio_evidence(const speedlabs::Summary& ratio, const speedlabs::Contention& contention);

/// The summary of 1/x for the summary of x (1/x reverses the order, so the quartiles swap).
speedlabs::Summary invert(const speedlabs::Summary& s);

/// The table's header line: device, variant, batch, the times and the peak memory.
void print_header();

/// One row of the table.
void print_row(const std::string& device, const std::string& variant, int64_t batch, const speedlabs::TimingStats& t,
               const std::string& memory);

/// The row of one variant.
void print_row(const Variant& v);

}  // namespace lab04
