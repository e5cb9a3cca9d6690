// Lab 02, checked outside the student's process (tests/support/checked.h): the roundings to float16 and
// bfloat16 of floats the grader's seed draws. The outputs are the rounded values as float32, compared bit for bit
// (any NaN matches a NaN: a NaN's own bits are not the lesson).
#include <c10/util/Half.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "exercise.h"
#include "tests/support/checked.h"

namespace speedlabs::checked {

namespace {

constexpr int64_t kDrawn = 1 << 18;  // floats per kind of input
constexpr Tolerance kExact{};        // rounding has one right answer

float float_of(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

uint32_t bits_of(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float half_value(uint16_t bits) { return static_cast<float>(c10::Half(bits, c10::Half::from_bits())); }
float bfloat16_value(uint16_t bits) { return float_of(uint32_t{bits} << 16); }

// kDrawn uniformly random 32-bit patterns: every exponent, subnormals, infinities and NaNs.
std::vector<uint32_t> draw_bits(at::Generator& generator) {
  const auto high = torch::randint(0, 1 << 16, {kDrawn}, generator, torch::kLong);
  const auto low = torch::randint(0, 1 << 16, {kDrawn}, generator, torch::kLong);
  const auto words = (high * 65536 + low).contiguous();
  std::vector<uint32_t> bits(kDrawn);
  for (int64_t i = 0; i < kDrawn; ++i) bits[i] = static_cast<uint32_t>(words.data_ptr<int64_t>()[i]);
  return bits;
}

// The floats where a rounding can go either way: halfway between two neighbouring 16-bit values (a tie) and
// one float32 step either side, for kDrawn 16-bit patterns drawn at random.
std::vector<float> draw_boundaries(at::Generator& generator, bool bfloat16) {
  std::vector<float> floats;
  for (const uint32_t drawn : draw_bits(generator)) {
    const uint16_t bits = static_cast<uint16_t>(drawn), next = static_cast<uint16_t>(bits + 1);
    const float low = bfloat16 ? bfloat16_value(bits) : half_value(bits);
    const float high = bfloat16 ? bfloat16_value(next) : half_value(next);
    if (!std::isfinite(low) || !std::isfinite(high) || (bits & 0x7fff) == (bfloat16 ? 0x7f7f : 0x7bff)) continue;
    const uint32_t middle = bits_of(low + (high - low) / 2);  // exact: one more mantissa bit than the 16-bit type
    for (const uint32_t near : {middle - 1, middle, middle + 1}) floats.push_back(float_of(near));
  }
  return floats;
}

// The values @p round gives on @p floats.
torch::Tensor rounded(const std::vector<float>& floats, float (*round)(float)) {
  auto values = torch::empty({static_cast<int64_t>(floats.size())}, torch::kFloat);
  for (size_t i = 0; i < floats.size(); ++i) values.data_ptr<float>()[i] = round(floats[i]);
  return values;
}

std::vector<float> as_floats(const std::vector<uint32_t>& bits) {
  std::vector<float> floats(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) floats[i] = float_of(bits[i]);
  return floats;
}

// A rounding to nearest (@p round: to the 16-bit type and back) on random floats and on the boundaries.
Outputs to_nearest_outputs(at::Generator& generator, bool bfloat16, float (*round)(float)) {
  return Outputs{{"random_floats", rounded(as_floats(draw_bits(generator)), round)},
                 {"ties_and_neighbours", rounded(draw_boundaries(generator, bfloat16), round)}};
}

}  // namespace

std::vector<Exercise> exercises() {
  return {
      {"float_to_half_bits",
       [](at::Generator& generator) {
         return to_nearest_outputs(generator, false, [](float x) { return half_value(lab02::float_to_half_bits(x)); });
       },
       kExact},
      {"half_bits_to_float",
       [](at::Generator& generator) {
         std::vector<float> values;
         for (const uint32_t drawn : draw_bits(generator)) values.push_back(lab02::half_bits_to_float(drawn & 0xffff));
         return Outputs{{"values", torch::tensor(values)}};
       },
       kExact},
      {"float_to_bfloat16_bits",
       [](at::Generator& generator) {
         return to_nearest_outputs(generator, true,
                                   [](float x) { return bfloat16_value(lab02::float_to_bfloat16_bits(x)); });
       },
       kExact},
      {"float_to_bfloat16_bits_stochastic",
       [](at::Generator& generator) {
         const auto floats = as_floats(draw_bits(generator));
         const auto random = draw_bits(generator);
         std::vector<float> values(floats.size());
         for (size_t i = 0; i < floats.size(); ++i)
           values[i] = bfloat16_value(lab02::float_to_bfloat16_bits_stochastic(floats[i], random[i]));
         return Outputs{{"values", torch::tensor(values)}};
       },
       kExact},
  };
}

}  // namespace speedlabs::checked
