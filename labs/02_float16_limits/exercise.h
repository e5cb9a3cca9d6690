/// @file labs/02_float16_limits/exercise.h
/// @brief Lab 02 exercise: rounding a float32 into float16 and bfloat16, bit by bit (to nearest, and
/// stochastically for bf16 weights).
///
/// Every 16-bit number in this lab goes through the first three functions: the lab's experiments store
/// values in lab02::YourHalf and lab02::YourBFloat16 (experiment.h), which call them, and compare the
/// result with Eigen's and libtorch's own types. The fourth rounds bf16 weights stochastically in the
/// lab's weight-update experiment (low_precision_updates.h). A 16-bit value is handled as its raw bits,
/// a uint16_t:
///
///     float32   sign 1 | exponent 8 (bias 127) | mantissa 23
///     float16   sign 1 | exponent 5 (bias 15)  | mantissa 10
///     bfloat16  sign 1 | exponent 8 (bias 127) | mantissa 7   (the top half of a float32)
///
/// Stubs live in labs/02_float16_limits/exercise.cpp, the reference in
/// solutions/02_float16_limits/exercise.cpp.
#pragma once
#include <cstdint>

namespace lab02 {

/// The float16 bit pattern of @p x: the float16 value nearest to x, as IEEE 754 stores it.
///
/// - Rounds to the nearest float16; a tie (x exactly halfway between two float16 values) goes to the
///   one whose last mantissa bit is 0 ("round to nearest, ties to even").
/// - Values too large for float16 become infinity of x's sign: everything from 65520 on (65504 is the
///   largest finite float16, 65520 the halfway point to the next power of two), and infinities.
/// - Below 2^-14 float16 has subnormals, multiples of 2^-24; below half of 2^-24 a value becomes zero.
/// - The sign always survives: -0.0f gives 0x8000, -1e-10f gives 0x8000 too.
/// - A NaN gives a NaN (exponent all ones, mantissa not zero), never infinity.
/// @param x  any float32, including infinities, NaNs, subnormals and -0
/// @return   the 16 bits of the float16 value
uint16_t float_to_half_bits(float x);

/// The float32 value of the float16 bit pattern @p bits. Every float16 value, subnormals and
/// infinities included, is exactly a float32, so this is exact: no rounding happens.
/// @param bits  any of the 65536 float16 bit patterns
/// @return      its value; a NaN pattern gives a NaN
float half_bits_to_float(uint16_t bits);

/// The bfloat16 bit pattern of @p x: the bfloat16 value nearest to x, ties to even.
///
/// bfloat16 is float32 with the low 16 mantissa bits dropped, so the exponent needs no change: the
/// rounding decides whether the kept top half goes up by one. Values beyond the largest bfloat16
/// (about 3.39e38) round to infinity; float32 subnormals round to bfloat16 subnormals or zero; the
/// sign survives; a NaN gives a NaN.
/// (The way back, bfloat16 bits to float, is the 16 bits shifted up: experiment.cpp does it.)
/// @param x  any float32
/// @return   the 16 bits of the bfloat16 value
uint16_t float_to_bfloat16_bits(float x);

/// The bfloat16 bit pattern of @p x, rounded stochastically: up to the next bfloat16 (away from zero)
/// with a probability equal to how far x lies towards it, down (towards zero) otherwise, so that on
/// average the stored value is x itself. This is how llm.c keeps bf16 weights without float32 masters.
///
/// The rule, exactly: add the low 16 bits of @p random to the 32 bits of x (as one unsigned integer),
/// then keep the top 16 bits. The carry reaches the kept bits, i.e. rounds up, for exactly the
/// `dropped` of the 65536 values of the low 16 random bits whose sum with the dropped bits reaches 2^16.
/// - Infinities stay infinities (their dropped bits are 0, so nothing carries).
/// - A finite float beyond the largest bfloat16 (about 3.39e38) becomes infinity when the carry comes.
/// - A NaN gives a NaN (e.g. the quiet NaN 0x7fc0 with x's sign), never infinity and never a carry
///   into the sign bit.
/// - The sign survives: -0.0f gives 0x8000 whatever @p random is.
/// @param x       any float32
/// @param random  a uniformly random 32-bit value; only its low 16 bits are used
/// @return        the 16 bits of the bfloat16 value
uint16_t float_to_bfloat16_bits_stochastic(float x, uint32_t random);

}  // namespace lab02
