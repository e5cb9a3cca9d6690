#include "python_peers.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/errors.h"
#include "common/process.h"
#include "common/timer.h"

namespace lab06 {

namespace gpt = speedlabs::gpt;
using nlohmann::json;

namespace {

// Files that one run of the Python peers needs, removed on every way out (an exception, an interrupt).
struct TemporaryFiles {
  std::vector<std::string> paths;
  ~TemporaryFiles() {
    std::error_code ignored;
    for (const auto& path : paths) std::filesystem::remove(path, ignored);
  }
};

}  // namespace

std::vector<RungResult> run_python_peers(const Config& config, const c10::Device& device, const Shape& shape,
                                         const gpt::GPTConfig& model_config, const gpt::NamedTensors& weights,
                                         const Batches& batches, std::string& failure) {
  namespace fs = std::filesystem;
  const int total = config.warmup + config.steps;
  gpt::NamedTensors state;
  state.emplace_back("config", torch::tensor({model_config.block_size, model_config.vocab_size, model_config.n_layer,
                                              model_config.n_head, model_config.n_embd}, torch::kLong));
  const AdamWHyperparameters hyper;  // the constants every rung's AdamW uses
  state.emplace_back("adamw", torch::tensor({config.lr, hyper.beta1, hyper.beta2, hyper.eps, hyper.weight_decay},
                                            torch::kFloat));
  for (const auto& [name, value] : weights) state.emplace_back("param/" + name, value);
  state.emplace_back("x", torch::stack(std::vector<torch::Tensor>(batches.x.begin(), batches.x.begin() + total)));
  state.emplace_back("y", torch::stack(std::vector<torch::Tensor>(batches.y.begin(), batches.y.begin() + total)));
  const fs::path stem = fs::temp_directory_path() / ("speedlabs-lab06-" + std::to_string(getpid()) + "-" + shape.name());
  // The state for the peers, their result, and the result while gpt_peers.py writes it.
  const TemporaryFiles temporary{{stem.string() + ".spdl", stem.string() + ".json", stem.string() + ".json.tmp"}};
  const std::string& state_file = temporary.paths[0];
  const std::string& result_file = temporary.paths[1];
  gpt::write_tensor_file(state_file, state);

  const auto joined = [](const std::vector<std::string>& items) {
    std::string text;
    for (const auto& item : items) text += (text.empty() ? "" : ",") + item;
    return text;
  };
  const std::string device_name = device.is_cuda() ? "cuda:" + std::to_string(device.has_index() ? device.index() : 0)
                                                   : "cpu";
  // An argv vector, never a shell: no path (--python, the temp folder) can become a command.
  const std::vector<std::string> argv{config.python, SPEEDLABS_SOURCE_DIR "/tests/reference/gpt_peers.py",
                                      "--state", state_file, "--out", result_file, "--device", device_name,
                                      "--modes", joined(config.peer_modes), "--compile-modes",
                                      joined(config.compile_modes), "--warmup", std::to_string(config.warmup),
                                      "--steps", std::to_string(config.steps)};
  // The C++ side's cached memory would otherwise sit unused next to the peers' on the same GPU.
  if (!device.is_cpu()) c10::getDeviceAllocator(device.type())->emptyCache();
  std::cout << "  python peers:";
  for (const auto& arg : argv) std::cout << " " << arg;
  std::cout << "\n" << std::flush;
  speedlabs::ProcessResult process;
  try {
    process = speedlabs::run_process(argv);
  } catch (const speedlabs::RuntimeFailure& error) {  // the Python could not be started at all
    failure = error.what();
    return {};
  }
  if (process.interrupted) {
    throw speedlabs::RuntimeFailure("interrupted while the Python peers ran (" + shape.name() +
                                    "); they were stopped and their temporary files removed");
  }
  if (!process.ok()) {
    std::cerr << process.output;
    failure = "gpt_peers.py failed (" + process.describe() + "); its output is printed above";
    return {};
  }
  std::ifstream result_in(result_file);
  if (!result_in) {
    failure = "gpt_peers.py exited 0 without writing " + result_file;
    return {};
  }
  const std::string output((std::istreambuf_iterator<char>(result_in)), std::istreambuf_iterator<char>());
  std::vector<RungResult> peers;
  try {
    const json printed = json::parse(output);  // kept alive: the loop below walks a part of it
    for (const auto& peer : printed.at("peers")) {
      RungResult result;
      result.name = peer.at("name").get<std::string>();
      result.shape = shape;
      result.ran = true;
      result.first_step_ms = peer.at("first_step_ms").get<double>();
      result.median_ms = peer.at("median_ms").get<double>();
      // Each measured step's time, for the spread (an older script without them: the median alone).
      result.step_ms = speedlabs::summarize_samples(
          peer.contains("step_ms") ? peer.at("step_ms").get<std::vector<double>>() : std::vector<double>{result.median_ms});
      result.tokens_per_s = peer.at("tokens_per_s").get<double>();
      result.losses = peer.at("losses").get<std::vector<double>>();
      if (peer.contains("peak_bytes") && !peer.at("peak_bytes").is_null()) {
        result.peak_bytes = peer.at("peak_bytes").get<int64_t>();
      }
      peers.push_back(std::move(result));
    }
  } catch (const json::exception& error) {
    failure = std::string("gpt_peers.py wrote no valid result: ") + error.what();
    return {};
  }
  return peers;
}

}  // namespace lab06
