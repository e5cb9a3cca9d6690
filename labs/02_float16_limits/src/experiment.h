/// @file labs/02_float16_limits/src/experiment.h
/// @brief Lab 02: what 16-bit numbers can and cannot hold, computed with your rounding (exercise.h) and
/// checked against Eigen's and libtorch's types.
#pragma once
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/observations.h"
#include "exercise.h"

namespace lab02 {

/// A float16 value stored as the bits your float_to_half_bits() gives: what the lab's experiments
/// compute in, beside Eigen::half and at::Half. Arithmetic is done in float32 and stored again, the
/// way Eigen and libtorch do it for their 16-bit types (float32's 24 bits are more than twice
/// float16's 11, so rounding the exact float32 sum once more gives the correctly rounded float16 sum).
struct YourHalf {
  uint16_t bits = 0;  ///< the float16 bit pattern
  YourHalf() = default;
  /// Stores @p x: float_to_half_bits(x).
  explicit YourHalf(float x) : bits(float_to_half_bits(x)) {}
  /// Reads the value back: half_bits_to_float(bits).
  explicit operator float() const { return half_bits_to_float(bits); }
};

/// The bfloat16 counterpart of YourHalf: stored by your float_to_bfloat16_bits(), read back by
/// putting the 16 bits on top of a float32 (bfloat16 is float32's top half, so that is exact).
struct YourBFloat16 {
  uint16_t bits = 0;  ///< the bfloat16 bit pattern
  YourBFloat16() = default;
  /// Stores @p x: float_to_bfloat16_bits(x).
  explicit YourBFloat16(float x) : bits(float_to_bfloat16_bits(x)) {}
  /// Reads the value back, exactly.
  explicit operator float() const {
    const uint32_t wide = static_cast<uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &wide, sizeof value);
    return value;
  }
};

/// The sum of two float16 values, computed in float32 and stored as float16.
inline YourHalf operator+(YourHalf a, YourHalf b) { return YourHalf(static_cast<float>(a) + static_cast<float>(b)); }

/// The sum of two bfloat16 values, computed in float32 and stored as bfloat16.
inline YourBFloat16 operator+(YourBFloat16 a, YourBFloat16 b) {
  return YourBFloat16(static_cast<float>(a) + static_cast<float>(b));
}

/// The value @p x becomes when it is stored in T.
/// @tparam T  float, YourHalf, YourBFloat16, Eigen::half, Eigen::bfloat16, at::Half or at::BFloat16
/// @param x   the value to store
/// @return    the stored value, as a float (every 16-bit value is exactly a float)
template <typename T>
float round_to(float x) {
  return static_cast<float>(T(x));
}

/// @p a plus @p b, computed the way a tensor of type T would: both stored in T, added, the sum stored in T.
///
/// Both operands are made T first: at::Half + float is a float in libtorch, which would hide the rounding.
/// @tparam T  as for round_to()
/// @param a   the first operand (e.g. a weight)
/// @param b   the second operand (e.g. an update)
/// @return    the sum as T stored it, as a float
template <typename T>
float add_in(float a, float b) {
  const T sum = T(a) + T(b);  // T + T stays T in Eigen, in libtorch and for YourHalf / YourBFloat16
  return static_cast<float>(sum);
}

/// A weight kept in T that receives the same small update @p steps times, like an optimizer would,
/// stored in T again after every addition: weights without float32 master copies.
/// @tparam T       as for round_to()
/// @param weight   the starting weight
/// @param update   what is added at each step (e.g. learning rate times gradient)
/// @param steps    how many updates (0 or more)
/// @return         the final weight, as a float
template <typename T>
float accumulate_updates(float weight, float update, int steps) {
  T stored(weight);
  const T step(update);
  for (int i = 0; i < steps; ++i) stored = stored + step;
  return static_cast<float>(stored);
}

/// One number format: its bit layout and the three numbers that say what it can hold.
struct FormatRow {
  std::string name;            ///< "fp32", "tf32", "fp16" or "bf16"
  int sign_bits = 0;           ///< always 1
  int exponent_bits = 0;       ///< sets the range (largest and smallest values)
  int mantissa_bits = 0;       ///< stored fraction bits (the leading 1 is implicit); sets the precision
  int storage_bytes = 0;       ///< bytes per value in memory (tf32 lives in float32 storage: 4)
  double max = 0;              ///< largest finite value
  double smallest_normal = 0;  ///< smallest value with full precision (below it: subnormals, then 0)
  double epsilon = 0;          ///< distance from 1 to the next larger value: the relative precision
  std::string source;          ///< where the numbers come from (which type, or the bit layout)
};

/// Whose types a table row is computed from.
enum class Library {
  eigen,    ///< float, Eigen::half, Eigen::bfloat16 (std::numeric_limits and sizeof)
  libtorch  ///< float (the C++ type of at::kFloat), at::Half, at::BFloat16; sizes from c10::elementSize
};

/// The format table (fp32, tf32, fp16, bf16) as one library's types report it.
///
/// tf32 has no C++ type in either library (it is a tensor-core mode for float32 matmuls), so its row
/// is always derived from its bit layout 1/8/10 with format_from_layout().
/// @param library  whose types to ask
/// @return         four rows, in the order fp32, tf32, fp16, bf16
std::vector<FormatRow> format_table(Library library);

/// The row of a binary floating-point format with this layout, from IEEE 754 arithmetic alone:
/// max = (2 - 2^-m) * 2^bias, smallest normal = 2^(1 - bias), epsilon = 2^-m, with bias = 2^(e-1) - 1.
/// @param name           the format's name
/// @param exponent_bits  e, the width of the exponent field
/// @param mantissa_bits  m, the width of the stored fraction
/// @param storage_bytes  bytes per value in memory
/// @return               the row, with source "bit layout 1/e/m"
FormatRow format_from_layout(const std::string& name, int exponent_bits, int mantissa_bits, int storage_bytes);

/// Prints the table with one row per format.
/// @param rows  rows from format_table()
/// @param out   where to print
void print_format_table(const std::vector<FormatRow>& rows, std::ostream& out);

/// @p v as a JSON value; JSON has no infinity, so non-finite values become the strings "inf", "-inf", "nan".
/// @param v  any double
/// @return   the number, or one of those strings
nlohmann::json json_number(double v);

/// @p v as the lab's tables print it: up to 9 significant digits, enough to tell any two floats apart.
/// @param v  any double
/// @return   the text
std::string text(double v);

/// @p x stored in a one-element CPU tensor of @p dtype, read back as a float (libtorch's tensor path).
/// @param x      the value to store
/// @param dtype  e.g. at::kHalf
/// @return       the stored value
float round_in_tensor(float x, c10::ScalarType dtype);

/// @p a + @p b as two one-element CPU tensors of @p dtype: the sum a training step would get.
/// @param a      the first operand
/// @param b      the second operand
/// @param dtype  e.g. at::kHalf
/// @return       the sum as stored in @p dtype
float add_in_tensor(float a, float b, c10::ScalarType dtype);

/// A one-element CPU tensor of @p dtype that gets @p update added in place @p steps times.
/// @param weight  the starting value
/// @param update  what each step adds
/// @param steps   how many steps (0 or more)
/// @param dtype   e.g. at::kHalf
/// @return        the final value
float accumulate_in_tensor(float weight, float update, int steps, c10::ScalarType dtype);

/// The experiment's knobs.
struct Config {
  int update_steps = 1000;  ///< how many updates of 1e-4 the weights in each format receive (1 to 100000)
};

/// The lab's knobs: --quick changes none of them, the whole lab takes well under a second.
inline speedlabs::Knobs<Config> knobs() {
  speedlabs::Knobs<Config> knobs;
  knobs
      .flag("--steps", "how many updates of 1e-4 each weight receives in the stalled-training experiment",
            &Config::update_steps)
      .check(CLI::Range(1, 100000));
  return knobs;
}

/// Prints the format table and every experiment with each library's result, and records the observations
/// fp32_1_plus_1e-8_is_1, fp16_1000_plus_0.3, fp16_max_is_65504, fp16_70000,
/// bf16_70000, bytes_per_value, weights_7b_bytes, fp16_update_1e-4_on_1_is_lost,
/// fp32_update_1e-4_on_1_is_kept, bf16_update_1e-4_on_1_is_lost, fp16_weight_stalls_fp32_weight_learns,
/// fp16_gradient_1e-8, fp16_gradient_scaled_65536_survives, bf16_gradient_1e-8_is_kept,
/// round_to_nearest_loses_update, stochastic_rounding_unbiased, kahan_bf16_tracks_fp32, bytes_per_parameter
/// (low_precision_updates.h), format_table, epsilon_constants_match_arithmetic (reported, not must-hold),
/// fp8_e4m3_limits_match_layout, fp8_e5m2_limits_match_layout, fp8_e4m3_500_and_1e-6 and fp8_e5m2_500_and_1e-6
/// (fp8.h). Everything runs on the CPU: rounding is defined by the format, not by the device.
/// @param config  the knobs
/// @param report  where the observations go
void run(const Config& config, speedlabs::Report& report);

}  // namespace lab02
