/// @file labs/02_float16_limits/src/fp8.h
/// @brief Lab 02, below 16 bits: the two 8-bit float formats, e4m3fn and e5m2, read from libtorch's
/// conversions and from their bit layouts.
#pragma once
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/observations.h"

namespace lab02 {

/// An 8-bit float format as its bit layout describes it: 1 sign bit, then exponent, then mantissa.
struct Fp8Layout {
  std::string name;          ///< "e4m3fn" or "e5m2"
  c10::ScalarType dtype;     ///< libtorch's dtype of the same format
  int exponent_bits = 0;     ///< 4 or 5 (bias 2^(e-1) - 1: 7 or 15)
  int mantissa_bits = 0;     ///< 3 or 2
  bool finite_only = false;  ///< "fn": no infinity, the all-ones exponent holds numbers, only S.1111.111 is NaN
};

/// e4m3fn: 1/4/3, bias 7, no infinity (the OCP FP8 format for weights and activations).
Fp8Layout e4m3fn_layout();
/// e5m2: 1/5/2, bias 15, IEEE-like with infinity (the OCP FP8 format for gradients).
Fp8Layout e5m2_layout();

/// What an 8-bit format can hold, read off the list of its 256 values.
struct Fp8Limits {
  double max = 0;                 ///< largest finite value
  double smallest_normal = 0;     ///< smallest value with the full 1 + m significant bits
  double smallest_subnormal = 0;  ///< smallest positive value
  double epsilon = 0;             ///< next value above 1, minus 1
  bool has_infinity = false;      ///< whether any pattern is +-inf
  int nan_patterns = 0;           ///< how many of the 256 patterns are NaN
};

/// The value of the bit pattern @p bits from the layout alone (sign, exponent, mantissa, bias), without libtorch.
/// @param layout  the format
/// @param bits    any of the 256 patterns
/// @return        its value: exact in float, NaN or +-inf where the layout says so
float fp8_value_from_layout(const Fp8Layout& layout, uint8_t bits);

/// All 256 patterns decoded by libtorch: a uint8 tensor 0..255 viewed as @p dtype, converted to float.
/// @param dtype  at::kFloat8_e4m3fn or at::kFloat8_e5m2
/// @return       256 values, in bit-pattern order
std::vector<float> fp8_values_in_libtorch(c10::ScalarType dtype);

/// The limits of a format whose 256 values are @p values (in any order). The smallest normal is the smallest
/// positive value whose gap to the next one is epsilon times itself: below it, subnormals have a fixed gap.
/// @param values  the 256 values (NaNs included)
/// @return        the limits
Fp8Limits fp8_limits(const std::vector<float>& values);

/// The epsilon libtorch's rounding shows: halve a power of two until 1 plus half of it, stored as @p dtype
/// through a tensor conversion and read back, is 1.
/// @param dtype  any floating-point dtype
/// @return       the epsilon, a power of two
double epsilon_by_rounding(c10::ScalarType dtype);

/// Prints the two 8-bit formats' table and records fp8_e4m3_limits_match_layout,
/// fp8_e5m2_limits_match_layout, fp8_e4m3_500_and_1e-6 and fp8_e5m2_500_and_1e-6.
/// @param report  where the observations go
void observe_fp8_formats(speedlabs::Report& report);

}  // namespace lab02
