// Lab 02 graded tests: your float16 and bfloat16 rounding (labs/02_float16_limits/exercise.cpp) against
// libtorch's c10::Half and c10::BFloat16, bit for bit, and your stochastic bfloat16 rounding against the bits its
// rule determines. Run them with ./lab check 02.
//
// What is covered, and why that is enough (the full sweep of all 2^32 floats takes about a minute of
// CPU at -O2, too slow for a check a student runs after every edit; tests/lab02/test_float16_limits.cpp
// runs it on the reference solution in CI):
//  - half_bits_to_float: all 65536 float16 patterns, exhaustively.
//  - float_to_half_bits: every float whose rounding can go either way is near a boundary: each float16
//    value itself, each midpoint between neighbours (ties), and the floats just below and above them,
//    for all 63488 finite float16 values of both signs; then every combination of the top 19 bits of
//    a float (sign, exponent, the 10 mantissa bits float16 keeps) with 28 patterns of the 13 dropped
//    bits (zero, each single bit, halfway plus each lower bit, halfway minus one, all ones), which hits every exponent
//    and every way the dropped bits can compare with halfway; and every float in the range that becomes a float16
//    subnormal (2^-25 to 2^-14, both signs: 184 million floats), where the rounding position moves with the exponent.
//  - float_to_bfloat16_bits: the same for bfloat16: all 2^16 top halves with 34 patterns of the 16
//    dropped bits, and each bfloat16 value, midpoint and neighbour.
//  - float_to_bfloat16_bits_stochastic: the lesson's cases and the edge cases (NaN, infinity, overflow, the sign),
//    for several floats every one of the 65536 random low halves (exactly `dropped` of them round up), and every
//    top half with dropped and random bits on both sides of the carry, against the bits the rule determines.
// NaN: any NaN pattern is accepted for a NaN input (libtorch's own choice of NaN bits is not the lesson).
#include <gtest/gtest.h>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <c10/util/bit_cast.h>

#include "exercise.h"

namespace {

// The bits of a float and back, without undefined behaviour (C++20's std::bit_cast, from c10).
uint32_t bits_of(float x) { return c10::bit_cast<uint32_t>(x); }
float float_of(uint32_t bits) { return c10::bit_cast<float>(bits); }

std::string hex(uint32_t value, int digits) {
  std::ostringstream out;
  out << "0x" << std::hex << std::setw(digits) << std::setfill('0') << value;
  return out.str();
}

std::string describe_float(float x) {
  std::ostringstream out;
  out << std::setprecision(9) << x << " [" << hex(bits_of(x), 8) << "]";
  return out.str();
}

float half_value(uint16_t bits) { return static_cast<float>(c10::Half(bits, c10::Half::from_bits())); }
float bfloat16_value(uint16_t bits) { return static_cast<float>(c10::BFloat16(bits, c10::BFloat16::from_bits())); }

bool is_half_nan(uint16_t bits) { return (bits & 0x7c00u) == 0x7c00u && (bits & 0x03ffu) != 0; }
bool is_bfloat16_nan(uint16_t bits) { return (bits & 0x7f80u) == 0x7f80u && (bits & 0x007fu) != 0; }

// Holds a 16-bit rounding function against the reference on many inputs and remembers the first miss.
class RoundingCheck {
 public:
  RoundingCheck(std::string function, std::function<uint16_t(float)> yours, std::function<uint16_t(float)> reference,
                std::function<float(uint16_t)> value, std::function<bool(uint16_t)> is_nan)
      : function_(std::move(function)),
        yours_(std::move(yours)),
        reference_(std::move(reference)),
        value_(std::move(value)),
        is_nan_(std::move(is_nan)) {}

  void check(float x) {
    ++checked_;
    const uint16_t got = yours_(x);
    const uint16_t expected = reference_(x);
    if (got == expected || (std::isnan(x) && is_nan_(got))) return;
    if (wrong_++ > 0) return;
    std::ostringstream out;
    out << function_ << "(" << describe_float(x) << "): expected " << hex(expected, 4) << " (" << value_(expected)
        << "), got " << hex(got, 4) << " (" << value_(got) << ")";
    if ((got & 0x8000u) != (expected & 0x8000u)) {
      out << ": the sign bit differs";
    } else if (!std::isnan(x)) {
      // Same sign: consecutive bit patterns are consecutive values, so the difference counts steps.
      out << ": off by " << static_cast<int>(got) - static_cast<int>(expected) << " step(s) of the 16-bit format";
    }
    first_miss_ = out.str();
  }

  ::testing::AssertionResult result(const std::string& inputs) const {
    if (wrong_ == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << first_miss_ << "; " << wrong_ << " of " << checked_ << " " << inputs
                                         << " wrong";
  }

 private:
  std::string function_;
  std::function<uint16_t(float)> yours_, reference_;
  std::function<float(uint16_t)> value_;
  std::function<bool(uint16_t)> is_nan_;
  uint64_t checked_ = 0, wrong_ = 0;
  std::string first_miss_;
};

RoundingCheck half_check() {
  return {"float_to_half_bits", lab02::float_to_half_bits, [](float x) { return c10::Half(x).x; }, half_value,
          is_half_nan};
}

RoundingCheck bfloat16_check() {
  return {"float_to_bfloat16_bits", lab02::float_to_bfloat16_bits, [](float x) { return c10::BFloat16(x).x; },
          bfloat16_value, is_bfloat16_nan};
}

// Each value of the 16-bit format, the midpoint to the next one up and the floats right next to both,
// of both signs: where round to nearest, ties to even, decides. A midpoint has one bit more than the
// format, so it is exact in float32. After the largest finite value, the next "value" is where rounding
// overflows: one step further.
void check_boundaries(RoundingCheck& check, const std::function<float(uint16_t)>& value, uint16_t largest_finite) {
  const float inf = std::numeric_limits<float>::infinity();
  for (uint32_t bits = 0; bits <= largest_finite; ++bits) {
    const float here = value(static_cast<uint16_t>(bits));
    const float step = bits == largest_finite ? here - value(static_cast<uint16_t>(bits - 1))
                                              : value(static_cast<uint16_t>(bits + 1)) - here;
    const float midpoint = here + step / 2;
    for (float x : {here, midpoint}) {
      for (float y : {x, std::nextafter(x, -inf), std::nextafter(x, inf)}) {
        check.check(y);
        check.check(-y);
      }
    }
  }
}

// Every combination of the top (32 - dropped) bits of a float with the given patterns of its dropped bits.
void check_top_bits(RoundingCheck& check, int dropped, const std::vector<uint32_t>& low_patterns) {
  for (uint32_t top = 0; top < (1u << (32 - dropped)); ++top) {
    for (uint32_t low : low_patterns) check.check(float_of((top << dropped) | low));
  }
}

// Zero, each single bit, halfway plus each lower bit, halfway minus one and all ones, of `dropped` bits.
std::vector<uint32_t> dropped_bit_patterns(int dropped) {
  const uint32_t halfway = 1u << (dropped - 1);
  std::vector<uint32_t> patterns{0, halfway - 1, (halfway << 1) - 1};
  for (int bit = 0; bit < dropped; ++bit) patterns.push_back(1u << bit);
  for (int bit = 0; bit < dropped - 1; ++bit) patterns.push_back(halfway | (1u << bit));
  return patterns;
}

struct Case {
  float x;
  uint16_t expected;
  const char* why;
};

TEST(Lab02_float_to_half_bits, LessonCases) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<Case> cases = {
      {1.0f, 0x3c00, "1 is exact"},
      {1000.3f, 0x63d1, "between 512 and 1024 the step is 0.5: 1000.3 becomes 1000.5"},
      {2049.0f, 0x6800, "halfway between 2048 and 2050: the even one, 2048"},
      {2051.0f, 0x6802, "halfway between 2050 and 2052: the even one, 2052"},
      {65504.0f, 0x7bff, "the largest float16"},
      {65519.0f, 0x7bff, "just below halfway to 65536: still 65504"},
      {65520.0f, 0x7c00, "halfway to 65536 rounds to even, which is infinity"},
      {-70000.0f, 0xfc00, "beyond the range: -inf"},
      {inf, 0x7c00, "infinity stays infinity"},
      {std::ldexp(1.0f, -14), 0x0400, "the smallest normal float16"},
      {std::ldexp(1.0f, -24), 0x0001, "the smallest subnormal"},
      {std::ldexp(1.0f, -25), 0x0000, "half the smallest subnormal: a tie, to even (zero)"},
      {std::ldexp(3.0f, -26), 0x0001, "three quarters of the smallest subnormal: up"},
      {1e-8f, 0x0000, "a 1e-8 gradient is lost"},
      {-1e-8f, 0x8000, "and keeps its sign: -0"},
      {-0.0f, 0x8000, "-0 keeps its sign"},
  };
  for (const auto& c : cases) {
    const uint16_t got = lab02::float_to_half_bits(c.x);
    EXPECT_EQ(hex(got, 4), hex(c.expected, 4))
        << "float_to_half_bits(" << describe_float(c.x) << ") should be " << half_value(c.expected) << " (" << c.why
        << "), got " << half_value(got);
  }
  const uint16_t nan = lab02::float_to_half_bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(is_half_nan(nan)) << "a NaN must stay a NaN (exponent 0x1f, mantissa not 0); got " << hex(nan, 4);
  const uint16_t signalling = lab02::float_to_half_bits(float_of(0x7f800001u));
  EXPECT_TRUE(is_half_nan(signalling)) << "a NaN whose mantissa has only its lowest bit set must stay a NaN, not "
                                          "become infinity; got "
                                       << hex(signalling, 4);
}

TEST(Lab02_float_to_half_bits, EveryRoundingBoundary) {
  RoundingCheck check = half_check();
  check_boundaries(check, half_value, 0x7bff);
  EXPECT_TRUE(check.result("values, midpoints and their neighbours"));
}

TEST(Lab02_float_to_half_bits, EveryExponentAndDroppedBitPattern) {
  RoundingCheck check = half_check();
  const auto patterns = dropped_bit_patterns(13);
  check_top_bits(check, 13, patterns);
  EXPECT_TRUE(check.result("floats (every top-19-bit prefix with " + std::to_string(patterns.size()) +
                           " patterns of the 13 dropped bits)"));
}

TEST(Lab02_float_to_half_bits, EveryFloatThatBecomesASubnormal) {
  RoundingCheck check = half_check();
  // Float exponent fields 102 to 112: 2^-25 <= |x| < 2^-14, both signs, every mantissa.
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t bits = 102u << 23; bits < 113u << 23; ++bits) check.check(float_of(sign | bits));
  }
  EXPECT_TRUE(check.result("floats from 2^-25 to 2^-14 in magnitude"));
}

TEST(Lab02_half_bits_to_float, LessonCases) {
  EXPECT_EQ(lab02::half_bits_to_float(0x3c00), 1.0f);
  EXPECT_EQ(lab02::half_bits_to_float(0x63d1), 1000.5f);
  EXPECT_EQ(lab02::half_bits_to_float(0x7bff), 65504.0f) << "the largest float16";
  EXPECT_EQ(lab02::half_bits_to_float(0x0400), std::ldexp(1.0f, -14)) << "the smallest normal float16";
  EXPECT_EQ(lab02::half_bits_to_float(0x0001), std::ldexp(1.0f, -24)) << "the smallest subnormal";
  EXPECT_EQ(lab02::half_bits_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(lab02::half_bits_to_float(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(hex(bits_of(lab02::half_bits_to_float(0x8000)), 8), "0x80000000") << "0x8000 is -0.0f, sign included";
  EXPECT_TRUE(std::isnan(lab02::half_bits_to_float(0x7e00))) << "0x7e00 is a NaN";
  EXPECT_TRUE(std::isnan(lab02::half_bits_to_float(0x7c01))) << "0x7c01 is a NaN, not infinity";
}

TEST(Lab02_half_bits_to_float, EveryHalfBitPattern) {
  uint32_t wrong = 0;
  std::string first;
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float got = lab02::half_bits_to_float(h);
    const float expected = half_value(h);
    const bool same = bits_of(got) == bits_of(expected) || (std::isnan(got) && std::isnan(expected));
    if (!same && wrong++ == 0) {
      std::ostringstream out;
      out << "half_bits_to_float(" << hex(h, 4) << "): expected " << describe_float(expected) << ", got "
          << describe_float(got);
      if (std::isfinite(got) && std::isfinite(expected) && expected != 0) {
        out << " (relative error " << std::abs(got - expected) / std::abs(expected) << ")";
      }
      first = out.str();
    }
  }
  EXPECT_EQ(wrong, 0u) << first << "; " << wrong << " of 65536 float16 patterns wrong";
}

TEST(Lab02_float_to_bfloat16_bits, LessonCases) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<Case> cases = {
      {1.0f, 0x3f80, "1 is exact"},
      {70000.0f, 0x4789, "8 significant bits: 70000 becomes 70144, finite"},
      {1.0f + std::ldexp(1.0f, -8), 0x3f80, "halfway between 1 and 1 + 2^-7: the even one, 1"},
      {1.0f + 3 * std::ldexp(1.0f, -8), 0x3f82, "halfway between 1 + 2^-7 and 1 + 2^-6: the even one, up"},
      {1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20), 0x3f81, "just above halfway: up"},
      {std::numeric_limits<float>::max(), 0x7f80, "the largest float is past bfloat16's last halfway point: inf"},
      {3e38f, 0x7f62, "3e38 stays finite"},
      {-inf, 0xff80, "-inf stays -inf"},
      {float_of(0x00008000u), 0x0000, "a float32 subnormal exactly halfway: to even, zero"},
      {float_of(0x00018000u), 0x0002, "a float32 subnormal halfway between 1 and 2 steps: to even, 2"},
      {-0.0f, 0x8000, "-0 keeps its sign"},
  };
  for (const auto& c : cases) {
    const uint16_t got = lab02::float_to_bfloat16_bits(c.x);
    EXPECT_EQ(hex(got, 4), hex(c.expected, 4))
        << "float_to_bfloat16_bits(" << describe_float(c.x) << ") should be " << bfloat16_value(c.expected) << " ("
        << c.why << "), got " << bfloat16_value(got);
  }
  const uint16_t nan = lab02::float_to_bfloat16_bits(float_of(0x7f800001u));
  EXPECT_TRUE(is_bfloat16_nan(nan)) << "a NaN whose mantissa has only its lowest bit set must stay a NaN, not "
                                       "become infinity by truncation; got "
                                    << hex(nan, 4);
}

TEST(Lab02_float_to_bfloat16_bits, EveryRoundingBoundary) {
  RoundingCheck check = bfloat16_check();
  check_boundaries(check, bfloat16_value, 0x7f7f);
  EXPECT_TRUE(check.result("values, midpoints and their neighbours"));
}

TEST(Lab02_float_to_bfloat16_bits, EveryExponentAndDroppedBitPattern) {
  RoundingCheck check = bfloat16_check();
  const auto patterns = dropped_bit_patterns(16);
  check_top_bits(check, 16, patterns);
  EXPECT_TRUE(check.result("floats (every top half with " + std::to_string(patterns.size()) +
                           " patterns of the 16 dropped bits)"));
}

// Stochastic rounding has no libtorch twin: for given x and random bits, its rule decides the bits. Written
// here as "round up when the dropped bits plus the random low 16 bits reach 2^16", not as the reference's carry.
uint16_t stochastic_bits_by_rule(float x, uint32_t random) {
  const uint32_t bits = bits_of(x);
  const uint32_t top = bits >> 16;
  const bool round_up = (bits & 0xffffu) + (random & 0xffffu) >= 0x10000u;
  return static_cast<uint16_t>(top + (round_up ? 1u : 0u));
}

struct StochasticCase {
  float x;
  uint32_t random;
  uint16_t expected;
  const char* why;
};

TEST(Lab02_float_to_bfloat16_bits_stochastic, LessonCases) {
  const float inf = std::numeric_limits<float>::infinity();
  const float halfway = float_of(0x3f808000u);  // 1 + 2^-8: halfway between 1 and 1 + 2^-7
  const std::vector<StochasticCase> cases = {
      {halfway, 0x7fffu, 0x3f80, "dropped 0x8000 + random 0x7fff stays below 2^16: down to 1"},
      {halfway, 0x8000u, 0x3f81, "dropped 0x8000 + random 0x8000 reaches 2^16: up to 1 + 2^-7"},
      {halfway, 0xabcd7fffu, 0x3f80, "only the low 16 random bits count"},
      {1.0f, 0xffffu, 0x3f80, "a bf16 value has no dropped bits: it never moves"},
      {float_of(0x3f80ffffu), 0x0001u, 0x3f81, "dropped 0xffff: up for every random value but 0"},
      {float_of(0x3f80ffffu), 0x0000u, 0x3f80, "... and down for 0"},
      {float_of(0x3fffffffu), 0x0001u, 0x4000, "the carry runs through a full mantissa into the exponent: 2"},
      {-halfway, 0x8000u, 0xbf81, "negative: the carry grows the magnitude, to -(1 + 2^-7)"},
      {-halfway, 0x7fffu, 0xbf80, "... or leaves it, -1"},
      {-0.0f, 0xffffu, 0x8000, "-0 keeps its sign"},
      {inf, 0xffffu, 0x7f80, "infinity stays infinity"},
      {-inf, 0xffffu, 0xff80, "-inf stays -inf"},
      {std::numeric_limits<float>::max(), 0x0001u, 0x7f80, "past the largest bfloat16, a carry overflows to inf"},
      {std::numeric_limits<float>::max(), 0x0000u, 0x7f7f, "without one, the largest bfloat16"},
      {float_of(0x00008000u), 0x8000u, 0x0001, "a float32 subnormal: up to the smallest bfloat16 subnormal"},
  };
  for (const auto& c : cases) {
    const uint16_t got = lab02::float_to_bfloat16_bits_stochastic(c.x, c.random);
    EXPECT_EQ(hex(got, 4), hex(c.expected, 4))
        << "float_to_bfloat16_bits_stochastic(" << describe_float(c.x) << ", " << hex(c.random, 8) << ") should be "
        << bfloat16_value(c.expected) << " (" << c.why << "), got " << bfloat16_value(got);
  }
  for (uint32_t nan_bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fffffffu, 0xffffffffu}) {
    for (uint32_t random : {0x0000u, 0x8000u, 0xffffu}) {
      const uint16_t got = lab02::float_to_bfloat16_bits_stochastic(float_of(nan_bits), random);
      EXPECT_TRUE(is_bfloat16_nan(got) && (got & 0x8000u) == ((nan_bits >> 16) & 0x8000u))
          << "a NaN must stay a NaN of its sign, never inf or a carry into the sign bit: float_to_bfloat16_bits_"
             "stochastic("
          << hex(nan_bits, 8) << ", " << hex(random, 8) << ") gave " << hex(got, 4);
    }
  }
}

// Unbiased, exactly: over all 65536 values of the random low bits, a float rounds up for exactly as many as its
// dropped bits say (dropped / 2^16 of them), so the mean of what it becomes is the float itself.
TEST(Lab02_float_to_bfloat16_bits_stochastic, RoundsUpInProportionToTheDroppedBits) {
  for (uint32_t bits : {0x3f800001u, 0x3f800100u, 0x3f804000u, 0x3f808000u, 0x3f80fffeu, 0xc2c81234u, 0x0000abcdu}) {
    const float x = float_of(bits);
    const uint16_t down = static_cast<uint16_t>(bits >> 16);
    uint32_t up = 0, other = 0;
    for (uint32_t random = 0; random < 0x10000u; ++random) {
      const uint16_t got = lab02::float_to_bfloat16_bits_stochastic(x, random);
      if (got == down + 1) {
        ++up;
      } else if (got != down) {
        ++other;
      }
    }
    EXPECT_EQ(other, 0u) << describe_float(x) << " must become one of its two bfloat16 neighbours " << hex(down, 4)
                         << " and " << hex(down + 1, 4);
    EXPECT_EQ(up, bits & 0xffffu) << describe_float(x) << " must round up for exactly " << (bits & 0xffffu)
                                  << " of the 65536 random low halves";
  }
}

// Every top half of a float (all exponents, both signs, NaNs and infinities) with patterns of the dropped bits
// and of the random bits that sit on both sides of the carry.
TEST(Lab02_float_to_bfloat16_bits_stochastic, EveryExponentAndCarryBoundary) {
  const std::vector<uint32_t> dropped = {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xfffeu, 0xffffu};
  uint64_t checked = 0, wrong = 0;
  std::string first;
  for (uint32_t top = 0; top < 0x10000u; ++top) {
    for (uint32_t low : dropped) {
      const float x = float_of((top << 16) | low);
      for (uint32_t random : {0x0000u, 0xffffu, 0x10000u - low, 0xffffu - low, 0x12340000u | (0x10000u - low)}) {
        ++checked;
        const uint16_t got = lab02::float_to_bfloat16_bits_stochastic(x, random);
        const bool ok = std::isnan(x) ? is_bfloat16_nan(got) : got == stochastic_bits_by_rule(x, random);
        if (!ok && wrong++ == 0) {
          first = "float_to_bfloat16_bits_stochastic(" + describe_float(x) + ", " + hex(random, 8) + "): expected " +
                  (std::isnan(x) ? std::string("a NaN") : hex(stochastic_bits_by_rule(x, random), 4)) + ", got " +
                  hex(got, 4);
        }
      }
    }
  }
  EXPECT_EQ(wrong, 0u) << first << "; " << wrong << " of " << checked << " wrong";
}

}  // namespace
