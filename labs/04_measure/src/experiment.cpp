#include "experiment.h"

#include <torch/torch.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>

#include "common/device.h"
#include "cpu_precision.h"
#include "gpu.h"
#include "interleaving.h"
#include "measurement.h"
#include "model.h"

namespace lab04 {

torch::nn::Sequential make_model(uint64_t seed) {
  torch::manual_seed(seed);
  return torch::nn::Sequential(torch::nn::Linear(512, 2048), torch::nn::GELU(), torch::nn::Linear(2048, 512));
}

CpuFeatures parse_cpuinfo(const std::string& text) {
  const auto value_of = [](const std::string& line) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) return std::string();
    const auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  };
  CpuFeatures features;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (features.model.empty() && line.rfind("model name", 0) == 0) features.model = value_of(line);
    if (!features.known && line.rfind("flags", 0) == 0) {
      std::istringstream words(value_of(line));
      const std::set<std::string> flags{std::istream_iterator<std::string>(words), {}};
      features.known = true;
      features.avx512f = flags.count("avx512f") > 0;
      features.avx512_bf16 = flags.count("avx512_bf16") > 0;
      features.amx_bf16 = flags.count("amx_bf16") > 0;
    }
  }
  return features;
}

CpuFeatures read_cpu_features() {
  std::ifstream file("/proc/cpuinfo");
  return parse_cpuinfo(std::string(std::istreambuf_iterator<char>(file), {}));
}

namespace {

// Warm-up: the first call of a fresh model pays for allocation, library set-up and (on a GPU)
// loading kernels and creating library handles.
void observe_first_call(const CpuResult& cpu, const std::optional<Variant>& gpu, speedlabs::Report& report) {
  nlohmann::json warmup;
  bool first_slower = true;
  std::vector<const Variant*> first_calls{&cpu.fp32};
  if (gpu) first_calls.push_back(&*gpu);
  for (const Variant* v : first_calls) {
    warmup[v->device] = {{"first_ms", v->timing.first_ms},
                         {"median_ms", v->timing.median_ms},
                         {"ratio", v->timing.first_ms / v->timing.median_ms}};
    first_slower = first_slower && v->timing.first_ms > v->timing.median_ms;
  }
  // Decided on the CPU's samples: the first call over each warm one, so a busy machine cannot pass for a cold call.
  std::vector<double> first_over_warm;
  for (double ms : cpu.fp32.timing.samples_ms) first_over_warm.push_back(cpu.fp32.timing.first_ms / ms);
  speedlabs::Evidence evidence(
      speedlabs::summarize_samples(first_over_warm), cpu.fp32.timing.contention,
      speedlabs::LoadEffect::ratio);  // a cold call against warm ones of the same CPU-bound forward
  report.decide(
      "first_call_slower_than_median",
      "the first call (cold) is slower than the median of the warm calls, on each device measured", warmup,
      "reported: first_ms > median_ms on every device", evidence,
      [&](double first_over_warm) { return first_over_warm > 1.0 && first_slower; }, false);
}

// The GPU part runs only on a CUDA device that was asked for; otherwise its observations say why not.
std::optional<Variant> run_gpu_if_asked(const Config& config, const c10::Device& device, speedlabs::Report& report) {
  if (config.cpu_only) {
    gpu_not_applicable("--device cpu: the GPU was not asked for", report);
  } else if (!device.is_cuda()) {
    gpu_not_applicable("no CUDA GPU that libtorch can use (running on " + speedlabs::describe(device) + ")", report);
  } else {
    return run_gpu(config, device, report);
  }
  return std::nullopt;
}

}  // namespace

void run(const Config& config, const c10::Device& device, speedlabs::Report& report) {
  std::cout << "\nThe lesson's model: Linear(512, 2048) > GELU > Linear(2048, 512), input " << config.batch
            << "x512, seed " << config.seed << ", no grad; " << config.timing.warmup << " warm-up + "
            << config.timing.repeats << " measured calls each\n";
  const CpuResult cpu = run_cpu(config, report);
  observe_interleaving(config, report);
  const std::optional<Variant> gpu = run_gpu_if_asked(config, device, report);
  observe_first_call(cpu, gpu, report);
  run_kernels(config, report);
}

}  // namespace lab04
