/// @file tests/support/tokenizer.h
/// @brief The GPT-2 tokenizer the dataset tests share, loaded once per test program.
#pragma once
#include <gtest/gtest.h>

#include "datasets/data_files.h"
#include "datasets/gpt2_tokenizer.h"

namespace speedlabs::testing {

/// The tokenizer from SPEEDLABS_DATA_DIR (CI: ../shared/datasets), else <checkout>/data; a test that
/// needs it fails with a message saying where the files should be when they cannot be loaded.
inline const datasets::GPT2Tokenizer& shared_tokenizer() {
  static const datasets::GPT2Tokenizer loaded = [] {
    try {
      return datasets::GPT2Tokenizer::load(datasets::resolve_data_dir());
    } catch (const std::exception& e) {
      ADD_FAILURE() << "cannot load the GPT-2 tokenizer (set SPEEDLABS_DATA_DIR or run ./lab setup): " << e.what();
      throw;
    }
  }();
  return loaded;
}

}  // namespace speedlabs::testing
