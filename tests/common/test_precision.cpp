#include <gtest/gtest.h>

#include "common/errors.h"
#include "common/precision.h"

using speedlabs::Precision;

TEST(Precision, NamesRoundTrip) {
  for (Precision p : speedlabs::all_precisions()) EXPECT_EQ(speedlabs::parse_precision(speedlabs::to_string(p)), p);
  EXPECT_THROW(speedlabs::parse_precision("fp8"), speedlabs::UsageError);
}

// What each mode switches on is lab 05's exercise; tests/lab05/graded.cpp checks it through the training step.

TEST(Precision, Tf32ScopeSetsAndRestoresMatmulPrecision) {
  ASSERT_EQ(speedlabs::current_matmul_precision(), "highest");
  {
    speedlabs::MatmulPrecisionScope scope(std::string("high"));  // what tf32 sets
    EXPECT_EQ(speedlabs::current_matmul_precision(), "high");
  }
  EXPECT_EQ(speedlabs::current_matmul_precision(), "highest");
}

TEST(Precision, ScopeByTorchNameRestoresToo) {
  ASSERT_EQ(speedlabs::current_matmul_precision(), "highest");
  {
    speedlabs::MatmulPrecisionScope scope(std::string("medium"));
    EXPECT_EQ(speedlabs::current_matmul_precision(), "medium");
  }
  EXPECT_EQ(speedlabs::current_matmul_precision(), "highest");
}

TEST(EnumNames, OneTableGivesValuesNamesAndAParserThatListsTheChoices) {
  enum class Color { red, green, blue };
  const speedlabs::EnumNames<Color> colors("color",
                                           {{Color::red, "red"}, {Color::green, "green"}, {Color::blue, "blue"}});
  EXPECT_EQ(colors.values(), (std::vector<Color>{Color::red, Color::green, Color::blue}));
  EXPECT_EQ(colors.names(), (std::vector<std::string>{"red", "green", "blue"}));
  for (Color c : colors.values()) EXPECT_EQ(colors.parse(colors.name(c)), c);
  try {
    colors.parse("mauve");
    FAIL() << "an unknown name must throw";
  } catch (const speedlabs::UsageError& e) {
    EXPECT_STREQ(e.what(), "unknown color 'mauve': choose red, green or blue");
  }
  EXPECT_EQ(speedlabs::precision_names().names(), (std::vector<std::string>{"fp32", "tf32", "bf16", "fp16"}));
}
