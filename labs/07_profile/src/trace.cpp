#include "trace.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>
#include <vector>

#include "accounting.h"
#include "common/device.h"
#include "common/errors.h"

namespace lab07 {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

torch::Tensor ranged_train_step(speedlabs::gpt::GPT& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x,
                                const torch::Tensor& y) {
  // The plain fp32 step with a named range around each phase, so the trace shows where the step's time
  // goes; lab 05's train_step (the exercise) is the same step without the ranges, with precisions.
  torch::Tensor loss;
  {
    RECORD_USER_SCOPE("forward");
    loss = model->forward(x, y).loss;
  }
  {
    RECORD_USER_SCOPE("backward");
    loss.backward();
  }
  {
    RECORD_USER_SCOPE("optimizer");
    optimizer.step();
    optimizer.zero_grad();
  }
  return loss.detach();
}

namespace {

// One event of the trace, reduced to what the tables need.
struct Span {
  std::string name;
  uint64_t start_ns = 0, end_ns = 0;
  bool user_range = false;
  double self_ns = 0;
  bool inside_aten = false;  // an aten op encloses it
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::string> dtypes;
  std::string range;          // the innermost named range around it
  const Span* top = nullptr;  // the top-level aten op it is (inside), if any
};

bool is_aten(const std::string& name) { return name.rfind("aten::", 0) == 0; }

// Self time and nesting per host thread: events on one thread nest like a call stack, so an event's
// self time is its duration minus that of the events directly inside it.
void nest(std::vector<Span>& spans) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  std::vector<Span*> stack;
  for (Span& span : spans) {
    while (!stack.empty() && stack.back()->end_ns <= span.start_ns) stack.pop_back();
    span.self_ns = static_cast<double>(span.end_ns - span.start_ns);
    if (!stack.empty()) {
      const Span& parent = *stack.back();
      stack.back()->self_ns -= span.self_ns;
      span.inside_aten = parent.inside_aten || is_aten(parent.name);
      span.range = parent.user_range ? parent.name : parent.range;
      span.top = parent.top;
    }
    if (is_aten(span.name) && !span.inside_aten) span.top = &span;
    stack.push_back(&span);
  }
}

// Every top-level op of @p spans (nested), with the matmul FLOPs of what it ran and the bytes of its inputs.
void collect_top_level(const std::vector<Span>& spans, std::vector<TopLevelOp>& out) {
  std::unordered_map<const Span*, size_t> index;
  for (const Span& span : spans) {
    if (span.top != &span) continue;
    index[&span] = out.size();
    out.push_back({span.name, span.range, static_cast<double>(span.end_ns - span.start_ns) / 1e6, 0,
                   tensor_bytes(span.name, span.shapes, span.dtypes), true});
  }
  for (const Span& span : spans) {
    if (span.top == nullptr || !is_aten(span.name)) continue;
    TopLevelOp& op = out[index.at(span.top)];
    op.matmul_flops += matmul_flops_of(span.name, span.shapes);
    op.metadata = op.metadata && is_metadata_op(span.name);
  }
}

// Sums by name, largest first, with each total's share of the step.
std::vector<OpTime> rank(const std::unordered_map<std::string, OpTime>& by_name, double step_ms) {
  std::vector<OpTime> ranked;
  for (const auto& [name, op] : by_name) ranked.push_back(op);
  for (auto& op : ranked) op.share = step_ms > 0 ? op.self_ms / step_ms : 0;
  std::sort(ranked.begin(), ranked.end(), [](const OpTime& a, const OpTime& b) { return a.self_ms > b.self_ms; });
  return ranked;
}

// Saves the trace next to its destination under a temporary name, checks it, then renames it into place, so a
// reader never sees half a trace (common/files' rule, for a file that libtorch writes itself). libtorch reports
// no write error (on a full disk it leaves a truncated file, or its own "<name>.tmp"), so the check is a parse;
// both temporary names are removed on every way out.
void save_atomically(profiler::ProfilerResult& result, const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path temporary =
      target.parent_path() / ("." + target.filename().string() + ".tmp" + std::to_string(getpid()));
  struct RemovedOnExit {
    std::vector<fs::path> paths;
    ~RemovedOnExit() {
      std::error_code ignored;
      for (const auto& p : paths) fs::remove(p, ignored);
    }
  } const temporaries{{temporary, temporary.string() + ".tmp"}};
  const std::string failed = "cannot write the trace '" + path + "'";
  try {
    result.save(temporary.string());
  } catch (const std::exception& e) {
    throw speedlabs::RuntimeFailure(failed + ": " + e.what());
  }
  std::ifstream saved(temporary);
  if (!saved || !nlohmann::json::accept(saved)) {
    throw speedlabs::RuntimeFailure(failed + ": libtorch wrote an incomplete file (is the disk full?)");
  }
  std::error_code error;
  fs::rename(temporary, target, error);
  if (error) throw speedlabs::RuntimeFailure(failed + ": " + error.message());
}

}  // namespace

namespace {

// Tiny ops per calibration loop: enough that the loop's time is theirs, not the clock's.
constexpr int kCalibrationOps = 4000;

// The profiler's settings, the same for a step and for the calibration that prices its events.
ProfilerConfig profiler_config() { return ProfilerConfig(ProfilerState::KINETO, /*report_input_shapes=*/true); }

std::set<ActivityType> activities_on(const c10::Device& device) {
  std::set<ActivityType> activities{ActivityType::CPU};
  if (device.is_cuda()) activities.insert(ActivityType::CUDA);
  return activities;
}

}  // namespace

double measure_profiler_us_per_event(const c10::Device& device, int rounds) {
  const auto one = torch::ones({1}, torch::TensorOptions().device(device));
  const auto loop_ms = [&] {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalibrationOps; ++i) one.add(one);
    speedlabs::synchronize(device);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  loop_ms();  // warm-up: the allocator and the dispatcher's caches
  std::vector<double> us_per_event;
  for (int round = 0; round < rounds; ++round) {
    const double plain_ms = loop_ms();
    const auto config = profiler_config();
    const auto activities = activities_on(device);
    profiler::prepareProfiler(config, activities);
    profiler::enableProfiler(config, activities);
    double profiled_ms = 0;
    try {
      profiled_ms = loop_ms();
    } catch (...) {
      profiler::disableProfiler();
      throw;
    }
    const auto result = profiler::disableProfiler();
    int64_t events = 0;
    for (const auto& event : result->events()) events += event.deviceType() == c10::DeviceType::CPU;
    if (events > 0) us_per_event.push_back((profiled_ms - plain_ms) * 1e3 / static_cast<double>(events));
  }
  if (us_per_event.empty()) return 0;
  std::sort(us_per_event.begin(), us_per_event.end());
  return us_per_event[us_per_event.size() / 2];
}

StepProfile profile_step(const std::function<torch::Tensor()>& step, const c10::Device& device,
                         const std::string& trace_path) {
  const std::set<ActivityType> activities = activities_on(device);
  const ProfilerConfig config = profiler_config();
  profiler::prepareProfiler(config, activities);
  profiler::enableProfiler(config, activities);
  torch::Tensor loss;
  try {
    loss = step();
    speedlabs::synchronize(device);  // the step's kernels finish inside the profiled window
  } catch (...) {
    profiler::disableProfiler();
    throw;
  }
  const std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  StepProfile profile;
  profile.loss = loss.item<double>();

  std::map<uint64_t, std::vector<Span>> host_threads;
  uint64_t first_ns = UINT64_MAX, last_ns = 0;
  std::unordered_map<std::string, OpTime> kernels;
  for (const auto& event : result->events()) {
    if (event.deviceType() != c10::DeviceType::CPU) {  // a GPU activity: kernel, copy or fill
      auto& kernel = kernels[event.name()];
      kernel.name = event.name();
      kernel.calls += 1;
      kernel.self_ms += static_cast<double>(event.durationNs()) / 1e6;
      continue;
    }
    Span span{event.name(), event.startNs(), event.endNs(),
              event.scope() == static_cast<uint8_t>(at::RecordScope::USER_SCOPE)};
    span.shapes = event.shapes().vec();
    span.dtypes = event.dtypes().vec();
    if (span.user_range) {
      profile.range_ms[span.name] += static_cast<double>(span.end_ns - span.start_ns) / 1e6;
      profile.range_count[span.name] += 1;
      first_ns = std::min(first_ns, span.start_ns);
      last_ns = std::max(last_ns, span.end_ns);
    }
    host_threads[event.startThreadId()].push_back(std::move(span));
  }
  for (const auto& [thread, spans] : host_threads) {
    for (const Span& span : spans) profile.events += span.start_ns >= first_ns && span.end_ns <= last_ns;
  }
  profile.step_ms = last_ns > first_ns ? static_cast<double>(last_ns - first_ns) / 1e6 : 0;

  std::unordered_map<std::string, OpTime> ops;
  for (auto& [thread, spans] : host_threads) {
    nest(spans);
    for (const Span& span : spans) {
      if (span.user_range) continue;
      auto& op = ops[span.name];
      op.name = span.name;
      op.calls += 1;
      op.self_ms += span.self_ns / 1e6;
      if (is_aten(span.name) && !span.inside_aten) profile.op_calls += 1;
    }
    collect_top_level(spans, profile.top_level);
  }
  profile.ops = rank(ops, profile.step_ms);
  profile.kernels = rank(kernels, profile.step_ms);
  for (const auto& kernel : profile.kernels) profile.cuda_kernels += kernel.calls;
  if (!trace_path.empty()) save_atomically(*result, trace_path);
  return profile;
}

}  // namespace lab07
