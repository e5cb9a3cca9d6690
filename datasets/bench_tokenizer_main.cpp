// bench_tokenizer: how fast GPT2Tokenizer encodes a file (MB/s, warm-up, repeats, median), what each step
// of encode() costs (--steps), how the time per byte holds on a megabyte of one character (--worst-case), and
// the modes scripts/maintainers/bench-tokenizer.py and tests/datasets/tiktoken_parity.py use to compare with
// tiktoken token for token (--encode-json, --encode-frames).
#include <CLI/CLI.hpp>

#include <time.h>

#include <chrono>
#include <limits>

#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "common/errors.h"
#include "common/files.h"
#include "common/timer.h"
#include "datasets/data_files.h"
#include "datasets/gpt2_tokenizer.h"

namespace {

using datasets::GPT2Tokenizer;

// --encode-frames: the input is a sequence of frames [uint32 little-endian length][bytes], any bytes at
// all (JSON strings cannot carry invalid UTF-8); for each, standard output gets [uint32 count][count int32 ids].
void encode_frames(const GPT2Tokenizer& tokenizer, const std::string& path) {
  const std::string input = speedlabs::read_user_file(path);
  auto little = [](uint32_t v) {
    std::string bytes(4, '\0');
    for (int i = 0; i < 4; ++i) bytes[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
    return bytes;
  };
  std::string out;
  for (size_t at = 0; at < input.size();) {
    if (input.size() - at < 4) throw speedlabs::UsageError(path + ": a frame's length is cut short");
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i) length |= uint32_t{static_cast<uint8_t>(input[at + i])} << (8 * i);
    at += 4;
    if (input.size() - at < length) throw speedlabs::UsageError(path + ": a frame is cut short");
    const std::vector<int32_t> ids = tokenizer.encode(std::string_view(input).substr(at, length));
    at += length;
    out += little(static_cast<uint32_t>(ids.size()));
    for (const int32_t id : ids) out += little(static_cast<uint32_t>(id));
  }
  std::cout.write(out.data(), static_cast<std::streamsize>(out.size()));
}

// --encode-json: the ids of each string of a JSON array.
nlohmann::json encode_json_file(const GPT2Tokenizer& tokenizer, const std::string& path) {
  nlohmann::json strings;
  try {
    strings = nlohmann::json::parse(speedlabs::read_user_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw speedlabs::UsageError(path + ": " + e.what());
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& text : strings) out.push_back(tokenizer.encode(text.get<std::string>()));
  return out;
}

// --steps: encode() and its steps timed round by round (each round calls every step once, so a busy moment
// of the machine touches all of them alike), with what became of the pieces.
nlohmann::json time_steps(const GPT2Tokenizer& tokenizer, const std::string& text, speedlabs::TimingOptions timing) {
  const std::vector<std::string_view> pieces = tokenizer.pretokenize(text);
  std::unordered_set<std::string_view> seen;
  std::vector<std::string_view> distinct;  // each piece of 2+ bytes once: what the word cache misses
  for (const std::string_view piece : pieces)
    if (piece.size() > 1 && seen.insert(piece).second) distinct.push_back(piece);
  std::vector<std::string_view> merged;  // of those, the ones that are not one token: what BPE merges
  GPT2Tokenizer::PieceCounts counts;
  for (const std::string_view piece : distinct) {
    tokenizer.encode_pieces({piece}, false, &counts);
    if (counts.merged == 1) merged.push_back(piece);
  }
  size_t sink = 0;
  const std::vector<std::function<void()>> steps = {
      [&] { sink += tokenizer.encode(text).size(); },
      [&] { sink += tokenizer.count_pieces(text); },
      [&] { sink += tokenizer.encode_pieces(pieces, true).size(); },
      [&] { sink += tokenizer.encode_pieces(pieces, false).size(); },
      [&] { sink += tokenizer.encode_pieces(distinct, false).size(); },
      [&] { sink += tokenizer.encode_pieces(merged, false).size(); },
  };
  const speedlabs::Interleaved measured = speedlabs::time_interleaved(steps, c10::Device(c10::kCPU), timing);
  tokenizer.encode_pieces(pieces, true, &counts);
  const char* names[] = {"encode",          "pretokenize",     "pieces_cached",
                         "pieces_uncached", "distinct_pieces", "merged_pieces"};
  nlohmann::json out = {{"bytes", text.size()},
                        {"pieces", counts.pieces},
                        {"single_bytes", counts.single_bytes},
                        {"cache_hits", counts.cache_hits},
                        {"whole_tokens", counts.whole_tokens},
                        {"merged", counts.merged},
                        {"merged_bytes", counts.merged_bytes},
                        {"distinct_pieces", distinct.size()},
                        {"merged_pieces", merged.size()},
                        {"contention", measured.contention.to_json()},
                        {"sink", sink}};
  for (size_t i = 0; i < steps.size(); ++i) out["ms"][names[i]] = measured.sides[i].median_ms;
  return out;
}

// The CPU time this thread has used, in ms: unlike the wall clock, it does not count the time another
// program had the core, so a loaded machine moves it far less.
double thread_cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
}

// --worst-case: ms per MB of encode() on texts of one repeated unit at several lengths (the fastest of the
// repeats, by the wall clock and by this thread's CPU time).
nlohmann::json time_worst_case(const GPT2Tokenizer& tokenizer, const std::vector<std::string>& units,
                               const std::vector<size_t>& lengths, int repeats) {
  nlohmann::json out = nlohmann::json::array();
  for (const std::string& unit : units) {
    nlohmann::json row = {{"unit", unit}, {"points", nlohmann::json::array()}};
    for (const size_t length : lengths) {
      std::string text;
      while (text.size() + unit.size() <= length) text += unit;
      size_t tokens = tokenizer.encode(text).size();  // warm-up
      double wall_ms = std::numeric_limits<double>::infinity(), cpu_ms = wall_ms;
      speedlabs::ContentionProbe probe;
      for (int i = 0; i < repeats; ++i) {
        const double cpu_start = thread_cpu_ms();
        const auto start = std::chrono::steady_clock::now();
        tokens = tokenizer.encode(text).size();
        wall_ms = std::min(wall_ms,
                           std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        cpu_ms = std::min(cpu_ms, thread_cpu_ms() - cpu_start);
      }
      const double megabytes = static_cast<double>(text.size()) / 1e6;
      row["points"].push_back({{"bytes", text.size()},
                               {"tokens", tokens},
                               {"min_ms", wall_ms},
                               {"ms_per_mb", wall_ms / megabytes},
                               {"cpu_ms_per_mb", cpu_ms / megabytes},
                               {"others_cores", probe.read().others_cores}});
    }
    out.push_back(row);
  }
  return out;
}

// The default mode: encode() of the whole text, warm-up then repeats, by the wall clock and by CPU time.
nlohmann::json time_file(const GPT2Tokenizer& tokenizer, const std::string& text, speedlabs::TimingOptions timing) {
  size_t tokens = 0;
  std::vector<double> cpu_ms;  // each call's CPU time on this thread: what another program cannot inflate
  const speedlabs::TimingStats stats = speedlabs::time_ms(
      [&] {
        const double start = thread_cpu_ms();
        tokens = tokenizer.encode(text).size();
        cpu_ms.push_back(thread_cpu_ms() - start);
      },
      c10::Device(c10::kCPU), timing);
  cpu_ms.erase(cpu_ms.begin(), cpu_ms.begin() + std::min<std::ptrdiff_t>(timing.warmup, cpu_ms.size()));
  const double cpu_median_ms = speedlabs::summarize_samples(cpu_ms).median;
  const double megabytes = static_cast<double>(text.size()) / 1e6;
  nlohmann::json result = {{"bytes", text.size()},
                           {"tokens", tokens},
                           {"first_ms", stats.first_ms},
                           {"median_ms", stats.median_ms},
                           {"min_ms", stats.min_ms},
                           {"max_ms", stats.max_ms},
                           {"mb_per_s", megabytes / (stats.median_ms / 1e3)},
                           {"cpu_median_ms", cpu_median_ms},
                           {"cpu_mb_per_s", megabytes / (cpu_median_ms / 1e3)},
                           {"warmup", timing.warmup},
                           {"repeats", timing.repeats},
                           {"contention", stats.contention.to_json()}};
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_tokenizer: encoding speed of the C++ GPT-2 tokenizer"};
  std::string data_dir;
  std::string file;
  std::string encode_json;
  std::string encode_frames_path;
  bool steps = false;
  bool worst_case = false;
  std::vector<std::string> units = {"a", " ", "\n", "7", "!", "ab", "\xc3\xa9", "\xf0\x9f\x98\x80"};
  std::vector<size_t> lengths = {size_t{1} << 16, size_t{1} << 17, size_t{1} << 18, size_t{1} << 19, size_t{1} << 20};
  speedlabs::TimingOptions timing{3, 20};
  app.add_option("--data-dir", data_dir, "data directory (default: $SPEEDLABS_DATA_DIR, else <checkout>/data)");
  app.add_option("--file", file, "text to encode (default: tiny shakespeare)");
  app.add_option("--warmup", timing.warmup, "calls before measuring")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_option("--repeats", timing.repeats, "measured calls")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_flag("--steps", steps, "time encode()'s steps (pretokenize, word cache, merges) and count the pieces");
  app.add_flag("--worst-case", worst_case, "ms per MB on texts of one repeated unit (--unit) at each --length");
  app.add_option(
      "--unit", units,
      "with --worst-case: the repeated units (default: a, a space, a newline, 7, !, ab, \xc3\xa9, an emoji)");
  app.add_option("--length", lengths, "with --worst-case: the lengths in bytes")->capture_default_str();
  app.add_option("--encode-json", encode_json,
                 "instead of timing: read a JSON array of strings, print a JSON array of their token ids");
  app.add_option("--encode-frames", encode_frames_path,
                 "instead of timing: read [u32 length][bytes] frames, write [u32 count][int32 ids] frames");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? speedlabs::kExitOk : speedlabs::kExitUsage;
  }
  try {
    const auto directory = datasets::resolve_data_dir(data_dir);
    const c10::Device cpu(c10::kCPU);
    std::optional<GPT2Tokenizer> tokenizer;
    const double load_ms = speedlabs::time_once_ms([&] { tokenizer.emplace(GPT2Tokenizer::load(directory)); }, cpu);

    if (!encode_frames_path.empty()) {
      encode_frames(*tokenizer, encode_frames_path);
      return speedlabs::kExitOk;
    }
    if (!encode_json.empty()) {
      std::cout << encode_json_file(*tokenizer, encode_json).dump() << "\n";
      return speedlabs::kExitOk;
    }
    if (worst_case) {
      std::cout << nlohmann::json{{"worst_case", time_worst_case(*tokenizer, units, lengths, timing.repeats)}}.dump()
                << "\n";
      return speedlabs::kExitOk;
    }

    const std::string path =
        file.empty() ? datasets::require_file(directory, datasets::kShakespearePath).string() : file;
    const std::string text = speedlabs::read_user_file(path);
    if (steps) {
      nlohmann::json result = time_steps(*tokenizer, text, timing);
      result["file"] = path;
      std::cout << result.dump() << "\n";
      return speedlabs::kExitOk;
    }
    nlohmann::json result = time_file(*tokenizer, text, timing);
    result["file"] = path;
    result["load_ms"] = load_ms;
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
