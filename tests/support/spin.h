/// @file tests/support/spin.h
/// @brief A CPU-bound wait: keeps the calling thread on a core, for tests that need a busy process or side.
#pragma once
#include <chrono>

namespace speedlabs::testing {

/// Keeps the calling thread on the CPU for @p seconds.
inline void spin_for(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  volatile double x = 0;
  while (std::chrono::steady_clock::now() < end) x = x + 1;
}

}  // namespace speedlabs::testing
