// Lab 02 exercise: float32 to float16 and bfloat16, in bits. Replace each body, then check your work
// with ./lab check 02 (it compares your bits with libtorch's c10::Half and c10::BFloat16, and your
// stochastic rounding with the bits its rule determines).
//
// Every 16-bit value the lab program prints as "yours" comes from the first three functions, and the
// stochastically rounded bf16 weights from the fourth, so once they pass, ./lab run 02 --mine shows the
// lesson's experiments running on your rounding.
#include "exercise.h"

#include "common/errors.h"

namespace lab02 {

// Why: float16 has 10 mantissa bits where float32 has 23, and a 5-bit exponent (bias 15) where
// float32 has 8 (bias 127). Storing a float32 in float16 therefore drops 13 mantissa bits, with
// rounding, and squeezes the exponent: this is where 1000.3 becomes 1000.5, 70000 becomes inf and a
// gradient of 1e-8 becomes 0.
//
// Hints:
//  - Get at the bits with c10::bit_cast<uint32_t>(x) from <c10/util/bit_cast.h> (or std::memcpy into a
//    uint32_t; never a pointer cast, which is undefined behaviour). Keep the sign
//    bit apart (bit 31 of the float goes to bit 15 of the half) and work on the magnitude.
//  - Read the magnitude as one integer: the exponent sits right above the mantissa, so when rounding
//    the mantissa up carries out of it, the carry lands in the exponent, which is exactly the next
//    power of two. Rebias with one subtraction: (127 - 15) << 23.
//  - Round to nearest, ties to even: look at the dropped bits. Above half of the last kept bit: up;
//    below: down; exactly half: up only if the last kept bit is 1. Write this once as a helper
//    (value >> shift, rounded); you will want it three times.
//  - Handle, in this order: NaN (magnitude above 0x7f800000: return a NaN, e.g. 0x7e00 with the sign),
//    too large (2^16 = 0x47800000 and up, infinity included: 0x7c00 with the sign), normal float16
//    (2^-14 = 0x38800000 and up), and the rest: a float16 subnormal, the number of 2^-24 steps,
//    which is the full 24-bit significand (implicit 1 included) shifted right by 126 - exponent.
//    Below 2^-25 (float exponent field < 102) the answer is a signed zero.
uint16_t float_to_half_bits(float /*x*/) {
  // TODO(lab02): the float16 bits of x, rounded to nearest even.
  speedlabs::not_implemented("02", "02_float16_limits", "float_to_half_bits");
}

// Why: reading a float16 back must be exact, or every experiment of the lab would mix two roundings.
// Every float16 value is a float32 value, so this direction only moves bit fields around.
//
// Hints:
//  - Split the 16 bits into sign (1), exponent (5) and mantissa (10).
//  - Exponent 31: infinity (mantissa 0) or NaN: float32 exponent 255, mantissa shifted left by 13.
//  - Exponent 1..30: a normal number; the float32 exponent is exponent + 112, the mantissa << 13.
//  - Exponent 0: zero or a subnormal, mantissa * 2^-24 (std::ldexp is exact here). Keep the sign,
//    also for zero: the bits 0x8000 are -0.0f.
float half_bits_to_float(uint16_t /*bits*/) {
  // TODO(lab02): the exact float32 value of a float16 bit pattern.
  speedlabs::not_implemented("02", "02_float16_limits", "half_bits_to_float");
}

// Why: bfloat16 is the top half of a float32: same sign, same 8-bit exponent, 7 of the 23 mantissa
// bits. That is why it keeps float32's range (70000 and 1e-8 survive) and loses precision (at 1 its
// step is 2^-7, so an update of 1e-4 vanishes).
//
// Hints:
//  - No exponent change is needed: round the magnitude's 32 bits to their top 16 with the same
//    nearest-even helper as above. The carry again does the right thing, up to infinity.
//  - Do not just truncate (bits >> 16): that rounds toward zero, and the tests will show the values
//    where it differs.
//  - A NaN must stay a NaN: a NaN whose mantissa has only low bits set would truncate to infinity.
//    Return a quiet NaN (0x7fc0) for it instead.
uint16_t float_to_bfloat16_bits(float /*x*/) {
  // TODO(lab02): the bfloat16 bits of x, rounded to nearest even.
  speedlabs::not_implemented("02", "02_float16_limits", "float_to_bfloat16_bits");
}

// Why: a bf16 weight of 1 has neighbours 2^-7 apart, so rounding to nearest throws away every update
// smaller than 2^-8: training stalls (the lab's round_to_nearest_loses_update). Rounding up with a
// probability equal to how far the value lies towards the upper neighbour makes the stored weight right
// on average: 1000 updates of 1e-4 each round up about 1.3% of the time, by 2^-7, which adds up to the
// same 0.1 a float32 weight gains. llm.c keeps its bf16 weights this way, without float32 masters.
//
// Hints:
//  - The whole rule is one integer addition: (bits of x) + (random & 0xffff), then keep the top 16 bits.
//    The low 16 bits of x are how far it lies towards the next bfloat16, in 65536ths: the sum carries
//    into the top half for exactly that many of the 65536 random values.
//  - As in float_to_bfloat16_bits, the carry moves into the exponent when the mantissa is full: the
//    next binade, or infinity after the largest bfloat16. Infinity's low bits are 0, so it stays.
//  - Adding to the raw bits of a negative number grows its magnitude: the rounding is symmetric, no
//    special case for the sign.
//  - A NaN is the exception: one with only low mantissa bits would truncate to infinity, and 0x7fffffff
//    would carry into the sign bit. Return a quiet NaN (0x7fc0, with x's sign) for any NaN.
uint16_t float_to_bfloat16_bits_stochastic(float /*x*/, uint32_t /*random*/) {
  // TODO(lab02): the bfloat16 bits of x, rounded up with probability (low 16 bits of x) / 2^16.
  speedlabs::not_implemented("02", "02_float16_limits", "float_to_bfloat16_bits_stochastic");
}

}  // namespace lab02
