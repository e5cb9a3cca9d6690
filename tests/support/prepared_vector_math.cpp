// Linked into every lab's and common's test executables: before any test runs, MKL's vector math library sets
// itself up on one thread (speedlabs::prepare_vector_math in common/precision.h says why).
#include <gtest/gtest.h>

#include "common/precision.h"

namespace {

class PreparedVectorMath : public ::testing::Environment {
 public:
  void SetUp() override { speedlabs::prepare_vector_math(); }
};

// Registered while the program starts, before main(); GoogleTest owns it.
[[maybe_unused]] ::testing::Environment* const prepared = ::testing::AddGlobalTestEnvironment(new PreparedVectorMath);

}  // namespace
