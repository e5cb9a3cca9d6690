#include "python_peers.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/build_paths.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/format.h"
#include "common/process.h"
#include "common/timer.h"
#include "exercise.h"

namespace lab06 {

namespace gpt = speedlabs::gpt;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The peers' result files, removed on every way out (an exception, an interrupt).
struct TemporaryFiles {
  std::vector<std::string> paths;
  ~TemporaryFiles() {
    std::error_code ignored;
    for (const auto& path : paths) fs::remove(path, ignored);
  }
};

// What gpt_peers.py reads: the model's shape, AdamW's constants, the initial weights and the steps' batches.
std::string peer_state(const Config& config, const gpt::GPTConfig& model_config, const gpt::NamedTensors& weights,
                       const Batches& batches) {
  const int total = config.warmup + config.steps;
  gpt::NamedTensors state;
  state.emplace_back("config", torch::tensor({model_config.block_size, model_config.vocab_size, model_config.n_layer,
                                              model_config.n_head, model_config.n_embd},
                                             torch::kLong));
  const AdamWHyperparameters hyper;  // the constants every rung's AdamW uses
  state.emplace_back(
      "adamw", torch::tensor({config.lr, hyper.beta1, hyper.beta2, hyper.eps, hyper.weight_decay}, torch::kFloat));
  for (const auto& [name, value] : weights) state.emplace_back("param/" + name, value);
  state.emplace_back("x", torch::stack(std::vector<torch::Tensor>(batches.x.begin(), batches.x.begin() + total)));
  state.emplace_back("y", torch::stack(std::vector<torch::Tensor>(batches.y.begin(), batches.y.begin() + total)));
  return gpt::encode_tensor_file(state);
}

// An argv vector, never a shell: no path (--python, the temp folder) can become a command.
std::vector<std::string> peer_argv(const Config& config, const c10::Device& device, const std::string& state_file,
                                   const std::string& result_file) {
  const auto joined = [](const std::vector<std::string>& items) {
    std::string text;
    for (const auto& item : items) text += (text.empty() ? "" : ",") + item;
    return text;
  };
  const std::string device_name =
      device.is_cuda() ? "cuda:" + std::to_string(device.has_index() ? device.index() : 0) : "cpu";
  return {config.python,     speedlabs::source_dir() + "/reference/gpt_peers.py",
          "--state",         state_file,
          "--out",           result_file,
          "--device",        device_name,
          "--modes",         joined(config.peer_modes),
          "--compile-modes", joined(config.compile_modes),
          "--warmup",        std::to_string(config.warmup),
          "--steps",         std::to_string(config.steps)};
}

// The peers' results as gpt_peers.py wrote them; throws json::exception when they are malformed.
std::vector<RungResult> parse_peers(const std::string& text, const Shape& shape) {
  const json printed = json::parse(text);  // kept alive: the loop below walks a part of it
  std::vector<RungResult> peers;
  for (const auto& peer : printed.at("peers")) {
    RungResult result;
    result.name = peer.at("name").get<std::string>();
    result.shape = shape;
    result.ran = true;
    result.first_step_ms = peer.at("first_step_ms").get<double>();
    result.median_ms = peer.at("median_ms").get<double>();
    // Each measured step's time, for the spread (an older script without them: the median alone).
    result.step_ms =
        speedlabs::summarize_samples(peer.contains("step_ms") ? peer.at("step_ms").get<std::vector<double>>()
                                                              : std::vector<double>{result.median_ms});
    result.tokens_per_s = peer.at("tokens_per_s").get<double>();
    result.losses = peer.at("losses").get<std::vector<double>>();
    if (peer.contains("peak_bytes") && !peer.at("peak_bytes").is_null()) {
      result.peak_bytes = peer.at("peak_bytes").get<int64_t>();
    }
    peers.push_back(std::move(result));
  }
  return peers;
}

// Why a finished run of the peers gave no result ("" when it did and @p output holds it).
std::string read_result(const speedlabs::ProcessResult& process, const Config& config, const std::string& result_file,
                        std::string& output) {
  if (process.timed_out) {
    std::cerr << process.output;
    return "gpt_peers.py did not finish within " + speedlabs::fixed(config.peer_timeout_s, 0) +
           " s and was stopped (a hung Python?); its output is printed above";
  }
  if (!process.ok()) {
    std::cerr << process.output;
    return "gpt_peers.py failed (" + process.describe() + "); its output is printed above";
  }
  std::ifstream result_in(result_file);
  if (!result_in) return "gpt_peers.py exited 0 without writing " + result_file;
  output.assign(std::istreambuf_iterator<char>(result_in), std::istreambuf_iterator<char>());
  return "";
}

}  // namespace

std::vector<RungResult> run_python_peers(const Config& config, const c10::Device& device, const Shape& shape,
                                         const gpt::GPTConfig& model_config, const gpt::NamedTensors& weights,
                                         const Batches& batches, std::string& failure) {
  const speedlabs::UnnamedFile state(peer_state(config, model_config, weights, batches), "speedlabs-lab06");
  const fs::path stem =
      fs::temp_directory_path() / ("speedlabs-lab06-" + std::to_string(getpid()) + "-" + shape.name());
  // The peers' result, and the result while gpt_peers.py writes it.
  const TemporaryFiles temporary{{stem.string() + ".json", stem.string() + ".json.tmp"}};
  const std::vector<std::string> argv = peer_argv(config, device, state.path(), temporary.paths[0]);
  // The C++ side's cached memory would otherwise sit unused next to the peers' on the same GPU.
  if (!device.is_cpu()) c10::getDeviceAllocator(device.type())->emptyCache();
  std::cout << "  python peers:";
  for (const auto& arg : argv) std::cout << " " << arg;
  std::cout << "\n" << std::flush;
  speedlabs::ProcessOptions options;
  options.timeout_s = config.peer_timeout_s;
  speedlabs::ProcessResult process;
  try {
    process = speedlabs::run_process(argv, options);
  } catch (const speedlabs::RuntimeFailure& error) {  // the Python could not be started at all
    failure = error.what();
    return {};
  }
  if (process.interrupted) {
    throw speedlabs::RuntimeFailure("interrupted while the Python peers ran (" + shape.name() +
                                    "); they were stopped and their temporary files removed");
  }
  std::string output;
  failure = read_result(process, config, temporary.paths[0], output);
  if (!failure.empty()) return {};
  try {
    return parse_peers(output, shape);
  } catch (const json::exception& error) {
    failure = std::string("gpt_peers.py wrote no valid result: ") + error.what();
    return {};
  }
}

}  // namespace lab06
