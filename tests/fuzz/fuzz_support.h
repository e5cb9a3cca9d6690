/// @file tests/fuzz/fuzz_support.h
/// @brief What the fuzz targets share: the real tokenizer, a scratch folder, and the one rule for errors.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/errors.h"
#include "datasets/data_files.h"
#include "datasets/gpt2_tokenizer.h"

namespace fuzz {

/// GPT-2's tokenizer from SPEEDLABS_DATA_DIR (the fuzz job runs where the data is), loaded once.
inline const datasets::GPT2Tokenizer& tokenizer() {
  static const datasets::GPT2Tokenizer loaded = datasets::GPT2Tokenizer::load(datasets::resolve_data_dir());
  return loaded;
}

/// A folder of this process, removed at exit.
inline const std::filesystem::path& scratch() {
  static const std::filesystem::path folder = [] {
    const auto path = std::filesystem::temp_directory_path() / ("speedlabs-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(path);
    std::atexit([] { std::filesystem::remove_all(scratch()); });
    return path;
  }();
  return folder;
}

/// A property that does not hold: print it and abort, which libFuzzer reports as a crash with the input.
[[noreturn]] inline void violated(const std::string& what) {
  std::fprintf(stderr, "fuzz property violated: %s\n", what.c_str());
  std::abort();
}

}  // namespace fuzz
