// bench_tokenizer: how fast GPT2Tokenizer encodes a file (MB/s, warm-up, repeats, median), and an
// --encode-json mode that scripts/maintainers/bench-tokenizer.py uses to compare with tiktoken token for token.
#include <CLI/CLI.hpp>

#include <iostream>
#include <nlohmann/json.hpp>

#include "common/errors.h"
#include "common/files.h"
#include "common/timer.h"
#include "datasets/data_files.h"
#include "datasets/gpt2_tokenizer.h"

int main(int argc, char** argv) {
  CLI::App app{"bench_tokenizer: encoding speed of the C++ GPT-2 tokenizer"};
  std::string data_dir;
  std::string file;
  std::string encode_json;
  speedlabs::TimingOptions timing{3, 20};
  app.add_option("--data-dir", data_dir, "data directory (default: $SPEEDLABS_DATA_DIR, else <checkout>/data)");
  app.add_option("--file", file, "text to encode (default: tiny shakespeare)");
  app.add_option("--warmup", timing.warmup, "calls before measuring")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_option("--repeats", timing.repeats, "measured calls")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--encode-json", encode_json,
                 "instead of timing: read a JSON array of strings, print a JSON array of their token ids");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? speedlabs::kExitOk : speedlabs::kExitUsage;
  }
  try {
    const auto directory = datasets::resolve_data_dir(data_dir);
    const c10::Device cpu(c10::kCPU);
    std::optional<datasets::GPT2Tokenizer> tokenizer;
    const double load_ms =
        speedlabs::time_once_ms([&] { tokenizer.emplace(datasets::GPT2Tokenizer::load(directory)); }, cpu);

    if (!encode_json.empty()) {
      nlohmann::json strings;
      try {
        strings = nlohmann::json::parse(speedlabs::read_user_file(encode_json));
      } catch (const nlohmann::json::exception& e) {
        throw speedlabs::UsageError(encode_json + ": " + e.what());
      }
      nlohmann::json out = nlohmann::json::array();
      for (const auto& text : strings) out.push_back(tokenizer->encode(text.get<std::string>()));
      std::cout << out.dump() << "\n";
      return speedlabs::kExitOk;
    }

    const std::string path =
        file.empty() ? datasets::require_file(directory, datasets::kShakespearePath).string() : file;
    const std::string text = speedlabs::read_user_file(path);
    size_t tokens = 0;
    const speedlabs::TimingStats stats =
        speedlabs::time_ms([&] { tokens = tokenizer->encode(text).size(); }, cpu, timing);
    const double megabytes = static_cast<double>(text.size()) / 1e6;
    const nlohmann::json result = {{"file", path},
                                   {"bytes", text.size()},
                                   {"tokens", tokens},
                                   {"load_ms", load_ms},
                                   {"first_ms", stats.first_ms},
                                   {"median_ms", stats.median_ms},
                                   {"min_ms", stats.min_ms},
                                   {"max_ms", stats.max_ms},
                                   {"mb_per_s", megabytes / (stats.median_ms / 1e3)},
                                   {"warmup", timing.warmup},
                                   {"repeats", timing.repeats}};
    std::cout << result.dump() << "\n";
    return speedlabs::kExitOk;
  } catch (const speedlabs::UsageError& e) {
    std::cerr << "bench_tokenizer: error: " << e.what() << "\n";
    return speedlabs::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "bench_tokenizer: error: " << e.what() << "\n";
    return speedlabs::kExitRuntime;
  }
}
