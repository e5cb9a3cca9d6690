/// @file tests/support/data.h
/// @brief Whether the data the lab tests train on is there (CI points SPEEDLABS_DATA_DIR at it).
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>

#include "datasets/data_files.h"

namespace speedlabs::testing {

/// True when every one of @p files (paths from datasets/manifest.tsv) is in the data directory.
inline bool data_available(std::initializer_list<const char*> files = {datasets::kShakespearePath}) {
  try {
    for (const char* file : files) datasets::require_file(datasets::resolve_data_dir(), file);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace speedlabs::testing

/// Skips a test (reported as skipped, never passed) when the data it trains on is missing.
#define SPEEDLABS_REQUIRE_DATA(...)                     \
  if (!speedlabs::testing::data_available(__VA_ARGS__)) \
  GTEST_SKIP() << "the data is not there: set SPEEDLABS_DATA_DIR or run ./lab setup"
