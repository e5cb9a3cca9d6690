#include "fp8.h"

#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e5m2.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <limits>

#include "common/table.h"
#include "experiment.h"

namespace lab02 {

Fp8Layout e4m3fn_layout() { return {"e4m3fn", at::kFloat8_e4m3fn, 4, 3, true}; }
Fp8Layout e5m2_layout() { return {"e5m2", at::kFloat8_e5m2, 5, 2, false}; }

float fp8_value_from_layout(const Fp8Layout& layout, uint8_t bits) {
  const int m = layout.mantissa_bits;
  const int all_ones = (1 << layout.exponent_bits) - 1;
  const int bias = (1 << (layout.exponent_bits - 1)) - 1;
  const int exponent = (bits >> m) & all_ones;
  const int mantissa = bits & ((1 << m) - 1);
  const float sign = (bits & 0x80) ? -1.0f : 1.0f;
  if (exponent == all_ones) {
    // IEEE: infinity or NaN. "fn" (finite, NaN only): the top binade holds numbers, but all-ones mantissa is NaN.
    if (layout.finite_only ? mantissa == (1 << m) - 1 : mantissa != 0) return std::numeric_limits<float>::quiet_NaN();
    if (!layout.finite_only) return sign * std::numeric_limits<float>::infinity();
  }
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), 1 - bias - m);  // subnormal
  return sign * std::ldexp(static_cast<float>((1 << m) + mantissa), exponent - bias - m);
}

std::vector<float> fp8_values_in_libtorch(c10::ScalarType dtype) {
  const auto patterns = torch::arange(256, torch::kInt32).to(torch::kUInt8);
  const auto values = patterns.view(dtype).to(torch::kFloat).contiguous();
  return {values.data_ptr<float>(), values.data_ptr<float>() + values.numel()};
}

Fp8Limits fp8_limits(const std::vector<float>& values) {
  Fp8Limits limits;
  std::vector<float> positive;
  for (float v : values) {
    if (std::isnan(v)) ++limits.nan_patterns;
    if (std::isinf(v)) limits.has_infinity = true;
    if (std::isfinite(v) && v > 0) positive.push_back(v);
  }
  std::sort(positive.begin(), positive.end());
  if (positive.size() < 2) return limits;
  limits.max = positive.back();
  limits.smallest_subnormal = positive.front();
  const auto one = std::upper_bound(positive.begin(), positive.end(), 1.0f);
  if (one != positive.end()) limits.epsilon = *one - 1.0;
  for (size_t i = 0; i + 1 < positive.size(); ++i) {
    if (positive[i + 1] - positive[i] == limits.epsilon * positive[i]) {
      limits.smallest_normal = positive[i];
      break;
    }
  }
  return limits;
}

double epsilon_by_rounding(c10::ScalarType dtype) {
  double step = 1.0;
  while (round_in_tensor(static_cast<float>(1.0 + step / 2), dtype) != 1.0f) step /= 2;
  return step;
}

namespace {

nlohmann::json limits_json(const Fp8Limits& l) {
  return {{"max", l.max},         {"smallest_normal", l.smallest_normal}, {"smallest_subnormal", l.smallest_subnormal},
          {"epsilon", l.epsilon}, {"has_infinity", l.has_infinity},       {"nan_patterns", l.nan_patterns}};
}

bool same_limits(const Fp8Limits& a, const Fp8Limits& b) { return limits_json(a) == limits_json(b); }

/// The constants libtorch's C++ type ships, as limits (its NaN count is not a constant: left at the layout's).
template <typename T>
Fp8Limits limits_of_type(int nan_patterns) {
  using limits = std::numeric_limits<T>;
  Fp8Limits l;
  l.max = static_cast<float>((limits::max)());
  l.smallest_normal = static_cast<float>((limits::min)());
  l.smallest_subnormal = static_cast<float>(limits::denorm_min());
  l.epsilon = static_cast<float>(limits::epsilon());
  l.has_infinity = limits::has_infinity;
  l.nan_patterns = nan_patterns;
  return l;
}

std::string layout_text(const Fp8Layout& layout) {
  return "1/" + std::to_string(layout.exponent_bits) + "/" + std::to_string(layout.mantissa_bits);
}

speedlabs::Table fp8_table() {
  speedlabs::Table table;
  table.left("format", 8).left("s/e/m bits", 12).left("bias", 6, speedlabs::fixed_digits(0)).left("max", 10);
  table.left("smallest normal", 16).left("smallest subnormal", 19).left("epsilon", 10).left("infinity", 10);
  table.left("NaN patterns", 0, speedlabs::fixed_digits(0));
  return table;
}

void print_fp8_row(const Fp8Layout& layout, const Fp8Limits& l) {
  const int bias = (1 << (layout.exponent_bits - 1)) - 1;
  fp8_table().print_row(
      std::cout, {layout.name, layout_text(layout), double(bias), text(l.max), text(l.smallest_normal),
                  text(l.smallest_subnormal), text(l.epsilon), l.has_infinity ? "yes" : "no", double(l.nan_patterns)});
}

/// One format's limits three ways: libtorch's decoding of all 256 patterns (plus its rounding for epsilon),
/// the same from the bit layout alone, and the constants of libtorch's C++ type.
template <typename T>
void observe_limits(const Fp8Layout& layout, const std::string& id, const std::string& claim,
                    const std::string& expected, speedlabs::Report& report) {
  const auto torch_values = fp8_values_in_libtorch(layout.dtype);
  std::vector<float> layout_values;
  int alike = 0;  // patterns both decode to the same float (NaN counts as the same as NaN)
  for (int bits = 0; bits < 256; ++bits) {
    layout_values.push_back(fp8_value_from_layout(layout, static_cast<uint8_t>(bits)));
    const float a = torch_values[bits], b = layout_values.back();
    if (a == b || (std::isnan(a) && std::isnan(b))) ++alike;
  }
  const Fp8Limits libtorch = fp8_limits(torch_values);
  const Fp8Limits from_layout = fp8_limits(layout_values);
  const Fp8Limits constants = limits_of_type<T>(from_layout.nan_patterns);
  const double rounded_epsilon = epsilon_by_rounding(layout.dtype);
  print_fp8_row(layout, libtorch);
  const std::string layout_name = "bit layout " + layout_text(layout);
  report.check(id, claim,
               {{"libtorch", limits_json(libtorch)},
                {layout_name, limits_json(from_layout)},
                {"numeric_limits", limits_json(constants)},
                {"epsilon_by_rounding", rounded_epsilon},
                {"patterns_decoded_alike", alike}},
               "libtorch's 256 values == the layout's, pattern by pattern; limits " + expected +
                   " from both, from numeric_limits and (epsilon) from rounding",
               alike == 256 && same_limits(libtorch, from_layout) && same_limits(libtorch, constants) &&
                   rounded_epsilon == libtorch.epsilon);
}

/// 500 and 1e-6 (and infinity) stored in an 8-bit format through a tensor and through libtorch's scalar type.
template <typename T>
nlohmann::json stored_values(const Fp8Layout& layout) {
  nlohmann::json out = nlohmann::json::object();
  const std::vector<std::pair<std::string, float>> inputs = {
      {"500", 500.0f}, {"1e-6", 1e-6f}, {"inf", std::numeric_limits<float>::infinity()}};
  std::cout << "  " << std::left << std::setw(34) << (layout.name + ": store 500, 1e-6, inf") << std::right;
  for (const auto& [name, x] : inputs) {
    const float tensor = round_in_tensor(x, layout.dtype);
    const float scalar = static_cast<float>(T(x));
    out["tensor"][name] = json_number(tensor);
    out["c10 scalar"][name] = json_number(scalar);
    std::cout << "  " << name << " -> " << text(tensor);
  }
  std::cout << "\n";
  return out;
}

}  // namespace

void observe_fp8_formats(speedlabs::Report& report) {
  std::cout << "\n8-bit formats (all 256 patterns through libtorch's conversion; epsilon also by rounding):\n";
  fp8_table().print_header(std::cout);
  observe_limits<c10::Float8_e4m3fn>(
      e4m3fn_layout(), "fp8_e4m3_limits_match_layout",
      "e4m3fn (1/4/3, bias 7) keeps its all-ones exponent for numbers: no infinity, NaN only as S.1111.111; "
      "libtorch decodes its 256 patterns exactly as the layout says",
      "max 448, smallest normal 2^-6, smallest subnormal 2^-9, epsilon 2^-3, no infinity, 2 NaNs", report);
  observe_limits<c10::Float8_e5m2>(
      e5m2_layout(), "fp8_e5m2_limits_match_layout",
      "e5m2 (1/5/2, bias 15) is float16 with 8 fewer mantissa bits: float16's range, infinity and NaNs; "
      "libtorch decodes its 256 patterns exactly as the layout says",
      "max 57344, smallest normal 2^-14, smallest subnormal 2^-16, epsilon 2^-2, infinity, 6 NaNs", report);
  std::cout << "\n";
  {
    const auto measured = stored_values<c10::Float8_e4m3fn>(e4m3fn_layout());
    const auto& tensor = measured["tensor"];
    // e4m3fn has no infinity: a conversion must saturate (448) or give NaN; which one is the library's choice.
    const bool saturates = tensor["500"] == 448.0;
    auto& o = report.check(
        "fp8_e4m3_500_and_1e-6",
        "e4m3fn cannot hold 500 (its largest value is 448 and it has no infinity) nor 1e-6 (half its smallest "
        "subnormal is about 1e-3)",
        measured, "500 -> 448 (saturated) or NaN, never inf; 1e-6 -> 0; tensor == c10 scalar",
        measured["tensor"] == measured["c10 scalar"] && (saturates || tensor["500"] == "nan") && tensor["1e-6"] == 0.0);
    o.claim += std::string("; this libtorch ") + (saturates ? "saturates, 500 becomes 448" : "gives NaN for 500") +
               ", and inf becomes " + tensor["inf"].dump();
  }
  {
    const auto measured = stored_values<c10::Float8_e5m2>(e5m2_layout());
    const auto& tensor = measured["tensor"];
    report.check("fp8_e5m2_500_and_1e-6",
                 "e5m2 holds 500 only coarsely (4 values per binade: 448, 512 around it) and has float16's "
                 "infinity, but 1e-6 is below half its smallest subnormal, 2^-17",
                 measured, "500 -> 512, 1e-6 -> 0, inf -> inf; tensor == c10 scalar",
                 measured["tensor"] == measured["c10 scalar"] && tensor["500"] == 512.0 && tensor["1e-6"] == 0.0 &&
                     tensor["inf"] == "inf");
  }
}

}  // namespace lab02
