// Lab 02 reference solution: float32 to float16 and bfloat16 (and back), round to nearest even; float32 to
// bfloat16 rounded stochastically.
#include "exercise.h"

#include <c10/util/bit_cast.h>

#include <cmath>

namespace lab02 {
namespace {

// The bits of a float and back, without undefined behaviour (C++20's std::bit_cast, from c10).
uint32_t bits_of(float x) { return c10::bit_cast<uint32_t>(x); }
float float_of(uint32_t bits) { return c10::bit_cast<float>(bits); }

constexpr uint32_t kFloatSignBit = 0x80000000u;
constexpr uint32_t kFloatInfinity = 0x7f800000u;  // exponent all ones, mantissa 0
constexpr uint16_t kHalfInfinity = 0x7c00u;
constexpr uint16_t kHalfQuietNaN = 0x7e00u;
constexpr uint16_t kBFloat16QuietNaN = 0x7fc0u;

// value >> shift, rounded to nearest, ties to even. A carry out of the kept mantissa bits moves into
// the exponent field above them, which is exactly the next binade (or infinity after the largest one).
uint32_t shift_right_to_nearest_even(uint32_t value, int shift) {
  const uint32_t kept = value >> shift;
  const uint32_t dropped = value & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  const bool round_up = dropped > halfway || (dropped == halfway && (kept & 1u));
  return kept + (round_up ? 1u : 0u);
}

}  // namespace

uint16_t float_to_half_bits(float x) {
  const uint32_t bits = bits_of(x);
  const auto sign = static_cast<uint16_t>((bits & kFloatSignBit) >> 16);
  const uint32_t magnitude = bits & ~kFloatSignBit;
  if (magnitude > kFloatInfinity) return sign | kHalfQuietNaN;
  if (magnitude >= 0x47800000u) return sign | kHalfInfinity;  // 2^16 and up (and inf): beyond any rounding
  if (magnitude >= 0x38800000u) {
    // 2^-14 and up: a normal float16. Rebias the exponent (127 - 15 = 112) and drop 13 mantissa bits;
    // 65520 and up carry into exponent 31, which is infinity.
    return sign | static_cast<uint16_t>(shift_right_to_nearest_even(magnitude - (112u << 23), 13));
  }
  // Below 2^-14: a float16 subnormal, a count of 2^-24 steps. x = significand * 2^(exponent - 150),
  // so the count is significand >> (126 - exponent), rounded.
  const auto exponent = static_cast<int>(magnitude >> 23);
  if (exponent < 102) return sign;  // below 2^-25, under half the smallest subnormal: zero
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  return sign | static_cast<uint16_t>(shift_right_to_nearest_even(significand, 126 - exponent));
}

float half_bits_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) return float_of(sign | kFloatInfinity | (mantissa << 13));  // inf, or NaN with its payload
  if (exponent == 0) {
    // Zero or a subnormal: mantissa * 2^-24, exact in float32.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  return float_of(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

uint16_t float_to_bfloat16_bits(float x) {
  const uint32_t bits = bits_of(x);
  const auto sign = static_cast<uint16_t>((bits & kFloatSignBit) >> 16);
  const uint32_t magnitude = bits & ~kFloatSignBit;
  if (magnitude > kFloatInfinity) return sign | kBFloat16QuietNaN;
  // Same exponent as float32: keep the top 16 bits, rounded. The largest floats carry into infinity.
  return sign | static_cast<uint16_t>(shift_right_to_nearest_even(magnitude, 16));
}

uint16_t float_to_bfloat16_bits_stochastic(float x, uint32_t random) {
  const uint32_t bits = bits_of(x);
  // A NaN with only low mantissa bits would truncate to infinity; the largest would carry into the sign bit.
  if ((bits & ~kFloatSignBit) > kFloatInfinity)
    return static_cast<uint16_t>((bits & kFloatSignBit) >> 16) | kBFloat16QuietNaN;
  // The dropped bits plus a uniform 16-bit number carry into the kept half with probability dropped / 2^16.
  return static_cast<uint16_t>((bits + (random & 0xffffu)) >> 16);
}

}  // namespace lab02
