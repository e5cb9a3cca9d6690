// The same three float sums, built once per instruction set: labs/01_vectorize/CMakeLists.txt compiles this
// file three times, with LAB01_ISA naming the namespace (sse2, avx2, avx512) and that set's flags. Eigen
// chooses its packet width from the compiler's macros (__SSE2__, __AVX2__, __AVX512F__), so only flags on the
// whole file widen it; a `target` attribute on a function would not.
#include "isa_sums.h"

#include <Eigen/Core>

#ifndef LAB01_ISA
#error "isa_sums.cpp is compiled once per instruction set with LAB01_ISA defined (labs/01_vectorize/CMakeLists.txt)"
#endif

namespace lab01::LAB01_ISA {

// flatten: every call inside, Eigen's templates included, is inlined into these functions. An Eigen function
// left out of line would be an inline symbol of the same name in all three builds, and the linker keeps one
// copy for all of them (the one definition rule), so the "SSE2" sum could run AVX-512 code.
// tests/lab01/isa_objects.sh checks that each build's object defines nothing but its own functions.

__attribute__((flatten)) float sum_loop(const float* data, int64_t n) {
  float total = 0.0f;
  for (int64_t i = 0; i < n; ++i) total += data[i];
  return total;
}

__attribute__((flatten)) float sum_simd_loop(const float* data, int64_t n) {
  float total = 0.0f;
#pragma omp simd reduction(+ : total)
  for (int64_t i = 0; i < n; ++i) total += data[i];
  return total;
}

__attribute__((flatten)) float sum_eigen(const float* data, int64_t n) {
  return Eigen::Map<const Eigen::VectorXf>(data, n).sum();
}

}  // namespace lab01::LAB01_ISA
