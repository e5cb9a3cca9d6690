#include "op_cost.h"

#include <torch/types.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "common/build_paths.h"
#include "common/process.h"
#include "common/timer.h"

namespace lab07 {

namespace {

// The shapes of the small linear: a few rows through a 64-wide layer, far too small to keep any
// processor busy, so what it costs is the work around the arithmetic.
constexpr int64_t kLinearRows = 8;
constexpr int64_t kLinearWidth = 64;
// A Python child that takes longer than this is stuck (a run takes a few seconds).
constexpr double kPythonTimeoutS = 300;

}  // namespace

OpCost measure_op_cost_cpp(const c10::Device& device, const OpCostOptions& options) {
  const auto on_device = torch::TensorOptions().device(device);
  const auto a = torch::ones({1}, on_device);
  const auto x = torch::randn({kLinearRows, kLinearWidth}, on_device);
  const auto w = torch::randn({kLinearWidth, kLinearWidth}, on_device);
  const auto b = torch::randn({kLinearWidth}, on_device);
  const auto repeated = [&](const std::function<void()>& op) {
    return [&options, op] {
      for (int i = 0; i < options.calls; ++i) op();
    };
  };
  OpCost cost;
  cost.timings = speedlabs::time_interleaved(
      {repeated([&] { const auto c = a + a; }), repeated([&] { const auto y = torch::linear(x, w, b); })}, device,
      {options.warmup, options.repeats});
  cost.add_us = cost.timings.sides[0].median_ms * 1e3 / options.calls;
  cost.linear_us = cost.timings.sides[1].median_ms * 1e3 / options.calls;
  return cost;
}

std::optional<OpCost> measure_op_cost_python(const std::string& python, const c10::Device& device,
                                             const OpCostOptions& options, std::string& failure) {
  const std::vector<std::string> argv{python,           speedlabs::source_dir() + "/labs/07_profile/src/op_cost.py",
                                      "--device",       device.str(),
                                      "--calls",        std::to_string(options.calls),
                                      "--repeats",      std::to_string(options.repeats),
                                      "--warmup",       std::to_string(options.warmup),
                                      "--threads",      std::to_string(at::get_num_threads()),
                                      "--linear-rows",  std::to_string(kLinearRows),
                                      "--linear-width", std::to_string(kLinearWidth)};
  speedlabs::ProcessOptions process;
  process.timeout_s = kPythonTimeoutS;
  speedlabs::ProcessResult result;
  try {
    result = speedlabs::run_process(argv, process);
  } catch (const std::exception& e) {
    failure = e.what();
    return std::nullopt;
  }
  // The result is the last line of the output; anything before it is the child's own messages.
  std::string line, last;
  std::istringstream lines(result.output);
  while (std::getline(lines, line)) {
    if (!line.empty()) last = line;
  }
  if (!result.ok()) {
    failure = python + " op_cost.py: " + result.describe() + ": " + last;
    return std::nullopt;
  }
  try {
    const auto j = nlohmann::json::parse(last);
    return OpCost{j.at("add_us").get<double>(), j.at("linear_us").get<double>()};
  } catch (const std::exception&) {
    failure = python + " op_cost.py printed no result: '" + last + "'";
    return std::nullopt;
  }
}

}  // namespace lab07
