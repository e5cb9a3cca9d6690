/// @file labs/01_vectorize/src/isa_sums.h
/// @brief The same float sums compiled once per x86 instruction set: SSE2, AVX2 and AVX-512.
///
/// isa_sums.cpp is compiled three times (labs/01_vectorize/CMakeLists.txt), each time with one set's compiler
/// flags and its functions in a namespace of that set's name, so no two builds share a symbol. Only plain
/// pointers cross this interface: Eigen's types and their alignment depend on the instruction set a file is
/// compiled for, so they must not travel between files compiled for different sets.
#pragma once
#include <cstdint>

/// Declares, in namespace `isa`, one build's sums of data[0..n): a plain loop with one running total, in
/// index order; the same loop under `#pragma omp simd reduction`, which allows the compiler one partial sum per
/// vector lane; and Eigen's sum() of a Map over the values.
#define LAB01_DECLARE_ISA_SUMS(isa)                  \
  namespace isa {                                    \
  float sum_loop(const float* data, int64_t n);      \
  float sum_simd_loop(const float* data, int64_t n); \
  float sum_eigen(const float* data, int64_t n);     \
  }

namespace lab01 {
LAB01_DECLARE_ISA_SUMS(sse2)
LAB01_DECLARE_ISA_SUMS(avx2)
LAB01_DECLARE_ISA_SUMS(avx512)
}  // namespace lab01
