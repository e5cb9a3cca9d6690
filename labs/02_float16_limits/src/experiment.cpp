#include "experiment.h"

#include <torch/types.h>
#include <Eigen/Core>

#include <cmath>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>
#include <utility>

#include "common/table.h"
#include "exercise.h"
#include "fp8.h"
#include "low_precision_updates.h"

namespace lab02 {

nlohmann::json json_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

std::string text(double v) {
  std::ostringstream s;
  s << std::setprecision(9) << v;
  return s.str();
}

namespace {

/// The epsilon T's own arithmetic shows: halve a power of two until adding half of it to 1 is lost.
/// Measured rather than read from numeric_limits, because a library's constant can be wrong.
template <typename T>
double measured_epsilon() {
  float step = 1.0f;
  while (static_cast<float>(T(1.0f) + T(step / 2)) != 1.0f) step /= 2;
  return step;
}

/// A row from a C++ type: bit widths from numeric_limits' digits and exponent range and from sizeof,
/// max and smallest normal from numeric_limits, epsilon from arithmetic in T.
template <typename T>
FormatRow row_from_type(const std::string& name, int storage_bytes, const std::string& source) {
  using limits = std::numeric_limits<T>;
  FormatRow row;
  row.name = name;
  row.mantissa_bits = limits::digits - 1;  // digits counts the implicit leading 1
  // An e-bit exponent field has bias 2^(e-1) - 1 = max_exponent - 1.
  while ((1 << row.exponent_bits) < limits::max_exponent) ++row.exponent_bits;
  ++row.exponent_bits;
  row.sign_bits = 8 * static_cast<int>(sizeof(T)) - row.exponent_bits - row.mantissa_bits;
  row.storage_bytes = storage_bytes;
  row.max = static_cast<float>((limits::max)());
  row.smallest_normal = static_cast<float>((limits::min)());
  row.epsilon = measured_epsilon<T>();
  row.source = source;
  return row;
}

bool same_numbers(const FormatRow& a, const FormatRow& b) {
  return a.sign_bits == b.sign_bits && a.exponent_bits == b.exponent_bits && a.mantissa_bits == b.mantissa_bits &&
         a.storage_bytes == b.storage_bytes && a.max == b.max && a.smallest_normal == b.smallest_normal &&
         a.epsilon == b.epsilon;
}

/// The same experiment computed several ways (your bits, Eigen's type, libtorch's type, a libtorch tensor).
struct Ways {
  std::vector<std::pair<std::string, float>> results;

  /// Every way gave the same value, bit for bit as a float (inf == inf).
  bool agree() const {
    for (const auto& r : results)
      if (!(r.second == results.front().second)) return false;
    return true;
  }
  float value() const { return results.front().second; }
  nlohmann::json measured() const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [way, v] : results) j[way] = json_number(v);
    return j;
  }
  void print(const std::string& experiment) const {
    std::cout << "  " << std::left << std::setw(34) << experiment;
    for (const auto& [way, v] : results) std::cout << "  " << way << " = " << text(v);
    std::cout << "\n";
  }
};

/// One experiment in your 16-bit type, in the 16-bit types of both libraries and in libtorch tensors of
/// that dtype. Yours comes first: a verdict needs all ways to agree, and the value shown is yours.
template <typename YourT, typename EigenT, typename TorchT, typename Fn, typename TensorFn>
Ways both_libraries(const std::string& experiment, c10::ScalarType dtype, Fn&& in_type, TensorFn&& in_tensor) {
  Ways ways{{{"yours", in_type(YourT{})},
             {"Eigen", in_type(EigenT{})},
             {"at::", in_type(TorchT{})},
             {std::string("tensor ") + c10::toString(dtype), in_tensor(dtype)}}};
  ways.print(experiment);
  return ways;
}

template <typename Fn, typename TensorFn>
Ways fp16(const std::string& experiment, Fn&& in_type, TensorFn&& in_tensor) {
  return both_libraries<YourHalf, Eigen::half, at::Half>(experiment, at::kHalf, in_type, in_tensor);
}
template <typename Fn, typename TensorFn>
Ways bf16(const std::string& experiment, Fn&& in_type, TensorFn&& in_tensor) {
  return both_libraries<YourBFloat16, Eigen::bfloat16, at::BFloat16>(experiment, at::kBFloat16, in_type, in_tensor);
}
/// float32 is the same C++ type in both libraries, so its second way is a libtorch float32 tensor.
Ways fp32(const std::string& experiment, float in_type, float in_tensor) {
  Ways ways{{{"float", in_type}, {"tensor Float", in_tensor}}};
  ways.print(experiment);
  return ways;
}

std::string agree_and(const std::string& rule) { return "all ways agree and " + rule; }

nlohmann::json row_json(const FormatRow& r) {
  return {{"format", r.name},
          {"sign_exponent_mantissa_bits", {r.sign_bits, r.exponent_bits, r.mantissa_bits}},
          {"bytes", r.storage_bytes},
          {"max", r.max},
          {"smallest_normal", r.smallest_normal},
          {"epsilon", r.epsilon}};
}

void observe_format_table(speedlabs::Report& report) {
  const auto eigen = format_table(Library::eigen);
  const auto torch_rows = format_table(Library::libtorch);

  bool libraries_agree = eigen.size() == torch_rows.size();
  bool layouts_match = true;
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < torch_rows.size(); ++i) {
    const FormatRow& r = torch_rows[i];
    libraries_agree = libraries_agree && i < eigen.size() && same_numbers(eigen[i], r);
    layouts_match =
        layouts_match && same_numbers(r, format_from_layout(r.name, r.exponent_bits, r.mantissa_bits, r.storage_bytes));
    rows.push_back(row_json(r));
  }
  report.check("format_table",
               "bits, max, smallest normal and epsilon of fp32, tf32, fp16, bf16: Eigen's types and libtorch's "
               "give the same table, and it matches the IEEE 754 formulas for each bit layout (tf32 comes from "
               "its layout 1/8/10 alone: it has no C++ type)",
               rows, "Eigen table == libtorch table == bit-layout formulas", libraries_agree && layouts_match);

  // The constants the libraries ship, held against the epsilon their own arithmetic shows.
  const std::vector<std::pair<std::string, std::pair<double, double>>> constants = {
      {"Eigen::half",
       {static_cast<float>(std::numeric_limits<Eigen::half>::epsilon()), measured_epsilon<Eigen::half>()}},
      {"Eigen::bfloat16",
       {static_cast<float>(std::numeric_limits<Eigen::bfloat16>::epsilon()), measured_epsilon<Eigen::bfloat16>()}},
      {"at::Half", {static_cast<float>(std::numeric_limits<at::Half>::epsilon()), measured_epsilon<at::Half>()}},
      {"at::BFloat16",
       {static_cast<float>(std::numeric_limits<at::BFloat16>::epsilon()), measured_epsilon<at::BFloat16>()}}};
  nlohmann::json measured = nlohmann::json::object();
  std::string wrong;
  for (const auto& [type, values] : constants) {
    measured[type] = {{"numeric_limits", values.first}, {"arithmetic", values.second}};
    if (values.first != values.second) wrong += (wrong.empty() ? "" : ", ") + type;
  }
  auto& o = report.check("epsilon_constants_match_arithmetic",
                         "each library's std::numeric_limits<T>::epsilon() equals the epsilon its arithmetic shows"
                         " (Eigen 3.4.0 ships 2^-13 for half; measure, do not trust a constant)",
                         measured, "constant == measured for every type, reported", wrong.empty(), false);
  if (!wrong.empty()) o.claim += "; wrong here: " + wrong;
}

}  // namespace

FormatRow format_from_layout(const std::string& name, int exponent_bits, int mantissa_bits, int storage_bytes) {
  const int bias = (1 << (exponent_bits - 1)) - 1;
  FormatRow row;
  row.name = name;
  row.sign_bits = 1;
  row.exponent_bits = exponent_bits;
  row.mantissa_bits = mantissa_bits;
  row.storage_bytes = storage_bytes;
  row.max = (2.0 - std::ldexp(1.0, -mantissa_bits)) * std::ldexp(1.0, bias);
  row.smallest_normal = std::ldexp(1.0, 1 - bias);
  row.epsilon = std::ldexp(1.0, -mantissa_bits);
  row.source = "bit layout 1/" + std::to_string(exponent_bits) + "/" + std::to_string(mantissa_bits);
  return row;
}

std::vector<FormatRow> format_table(Library library) {
  // tf32 is a tensor-core mode that reads float32 storage; no C++ type exists to ask.
  FormatRow tf32 = format_from_layout("tf32", 8, 10, 4);
  tf32.source += " (no C++ type: derived from the layout)";
  if (library == Library::eigen) {
    return {row_from_type<float>("fp32", sizeof(float), "std::numeric_limits<float>"), tf32,
            row_from_type<Eigen::half>("fp16", sizeof(Eigen::half), "Eigen::half"),
            row_from_type<Eigen::bfloat16>("bf16", sizeof(Eigen::bfloat16), "Eigen::bfloat16")};
  }
  const auto bytes = [](c10::ScalarType t) { return static_cast<int>(c10::elementSize(t)); };
  return {
      row_from_type<float>("fp32", bytes(at::kFloat), "float, the C++ type of at::kFloat"), tf32,
      row_from_type<at::Half>("fp16", bytes(at::kHalf), "at::Half (Eigen::half: see format_table)"),
      row_from_type<at::BFloat16>("bf16", bytes(at::kBFloat16), "at::BFloat16 (Eigen::bfloat16: see format_table)")};
}

void print_format_table(const std::vector<FormatRow>& rows, std::ostream& out) {
  out << "\nNumber formats (max and smallest normal from std::numeric_limits, epsilon from arithmetic in the type):\n";
  speedlabs::Table table;
  table.left("format", 8).left("s/e/m bits", 12).left("bytes", 7, speedlabs::fixed_digits(0)).left("max", 15);
  table.left("smallest normal", 16).left("epsilon", 14).left("from", 0);
  for (const auto& r : rows) {
    std::ostringstream bits;
    bits << r.sign_bits << "/" << r.exponent_bits << "/" << r.mantissa_bits;
    table.add_row(
        {r.name, bits.str(), double(r.storage_bytes), text(r.max), text(r.smallest_normal), text(r.epsilon), r.source});
  }
  table.print(out);
}

float round_in_tensor(float x, c10::ScalarType dtype) {
  return torch::full({1}, x, torch::kFloat).to(dtype).item<float>();
}

float add_in_tensor(float a, float b, c10::ScalarType dtype) {
  const auto sum = torch::full({1}, a, torch::kFloat).to(dtype) + torch::full({1}, b, torch::kFloat).to(dtype);
  return sum.item<float>();
}

float accumulate_in_tensor(float weight, float update, int steps, c10::ScalarType dtype) {
  auto stored = torch::full({1}, weight, torch::kFloat).to(dtype);
  const auto step = torch::full({1}, update, torch::kFloat).to(dtype);
  for (int i = 0; i < steps; ++i) stored.add_(step);
  return stored.item<float>();
}

namespace {

// The experiments' makers: each returns a function that computes in the type of the (default-constructed) value
// it is given, or in a libtorch tensor of the dtype it is given.
auto add(float a, float b) {
  return [=](auto type) { return add_in<decltype(type)>(a, b); };
}
auto add_tensor(float a, float b) {
  return [=](c10::ScalarType t) { return add_in_tensor(a, b, t); };
}
auto store(float x) {
  return [=](auto type) { return round_to<decltype(type)>(x); };
}
auto store_tensor(float x) {
  return [=](c10::ScalarType t) { return round_in_tensor(x, t); };
}

// Rounding and range: what 1 + 1e-8, 1000 + 0.3, 65504 and 70000 become in each format.
void observe_rounding_and_range(speedlabs::Report& report) {
  {
    const auto w = fp32("fp32: 1 + 1e-8", add_in<float>(1.0f, 1e-8f), add_in_tensor(1.0f, 1e-8f, at::kFloat));
    report.check("fp32_1_plus_1e-8_is_1",
                 "in float32, 1 + 1e-8 is exactly 1: the next float32 after 1 is 1 + 2^-23 (about 1.2e-7), "
                 "and 1e-8 is less than half that step",
                 w.measured(), agree_and("the sum == 1"), w.agree() && w.value() == 1.0f);
  }
  {
    const auto w = fp16("fp16: 1000 + 0.3", add(1000.0f, 0.3f), add_tensor(1000.0f, 0.3f));
    report.check("fp16_1000_plus_0.3",
                 "float16 cannot hold 1000.3: between 512 and 1024 its values are 0.5 apart, so the sum "
                 "rounds to 1000.5",
                 w.measured(), agree_and("the sum == 1000.5"), w.agree() && w.value() == 1000.5f);
  }
  {
    Ways w{{{"yours", half_bits_to_float(0x7bff)},  // exponent 30, mantissa all ones
            {"Eigen", static_cast<float>((std::numeric_limits<Eigen::half>::max)())},
            {"at::", static_cast<float>((std::numeric_limits<at::Half>::max)())},
            {"bit layout 1/5/10", static_cast<float>(format_from_layout("fp16", 5, 10, 2).max)}}};
    w.print("fp16: largest finite value");
    report.check("fp16_max_is_65504",
                 "float16's 5 exponent bits stop at 2^15, so its largest value is (2 - 2^-10) * 2^15 = 65504",
                 w.measured(), agree_and("max == 65504"), w.agree() && w.value() == 65504.0f);
  }
  {
    const auto w = fp16("fp16: store 70000", store(70000.0f), store_tensor(70000.0f));
    report.check("fp16_70000",
                 "float16's largest finite value is 65504 and rounding sends everything from 65520 on to infinity, "
                 "so storing 70000 gives infinity",
                 w.measured(), agree_and("the stored value is +inf"),
                 w.agree() && std::isinf(w.value()) && w.value() > 0);
  }
  {
    const auto w = bf16("bf16: store 70000", store(70000.0f), store_tensor(70000.0f));
    // bfloat16 keeps 8 significant bits: a stored value is within 2^-8 (relative) of the original.
    const double relative_error = std::abs(w.value() - 70000.0) / 70000.0;
    report.check("bf16_70000",
                 "bfloat16 has float32's 8 exponent bits, so 70000 stays finite (rounded to 8 significant bits)",
                 w.measured(), agree_and("finite, within 2^-8 relative of 70000"),
                 w.agree() && std::isfinite(w.value()) && relative_error <= std::ldexp(1.0, -8));
  }
}

// Storage: bytes per value, and what that makes of a 7-billion-weight model.
void observe_storage_size(speedlabs::Report& report) {
  {
    const std::vector<int> eigen_bytes = {sizeof(float), sizeof(Eigen::half), sizeof(Eigen::bfloat16)};
    std::vector<int> torch_bytes;
    for (auto t : {at::kFloat, at::kHalf, at::kBFloat16})
      torch_bytes.push_back(static_cast<int>(torch::empty({1}, torch::dtype(t)).element_size()));
    const std::vector<int> expected = {4, 2, 2};
    std::cout << "  " << std::left << std::setw(34) << "bytes per value fp32, fp16, bf16"
              << "  Eigen (sizeof) = " << eigen_bytes[0] << ", " << eigen_bytes[1] << ", " << eigen_bytes[2]
              << "  libtorch (element_size) = " << torch_bytes[0] << ", " << torch_bytes[1] << ", " << torch_bytes[2]
              << "\n";
    report.check("bytes_per_value", "float32 takes 4 bytes per value, float16 and bfloat16 take 2",
                 {{"Eigen sizeof", eigen_bytes}, {"libtorch element_size", torch_bytes}},
                 "(4, 2, 2) for (float32, float16, bfloat16) in both",
                 eigen_bytes == expected && torch_bytes == expected);
  }
  {
    // 7 billion weights. libtorch: the byte size of a tensor on the meta device, which allocates nothing.
    constexpr int64_t kWeights = 7'000'000'000;
    const auto gigabytes_eigen = [&](size_t bytes) { return static_cast<double>(kWeights) * bytes / 1e9; };
    const auto gigabytes_torch = [&](c10::ScalarType t) {
      return static_cast<double>(torch::empty({kWeights}, torch::dtype(t).device(torch::kMeta)).nbytes()) / 1e9;
    };
    const nlohmann::json eigen = {{"fp32_gb", gigabytes_eigen(sizeof(float))},
                                  {"fp16_gb", gigabytes_eigen(sizeof(Eigen::half))},
                                  {"bf16_gb", gigabytes_eigen(sizeof(Eigen::bfloat16))}};
    const nlohmann::json torch_gb = {{"fp32_gb", gigabytes_torch(at::kFloat)},
                                     {"fp16_gb", gigabytes_torch(at::kHalf)},
                                     {"bf16_gb", gigabytes_torch(at::kBFloat16)}};
    std::cout << "  " << std::left << std::setw(34) << "7e9 weights, GB"
              << "  Eigen = " << eigen.dump() << "  libtorch meta tensor = " << torch_gb.dump() << "\n";
    const nlohmann::json expected = {{"fp32_gb", 28.0}, {"fp16_gb", 14.0}, {"bf16_gb", 14.0}};
    report.check("weights_7b_bytes", "a 7-billion-weight model takes 28 GB in float32 and 14 GB in float16 or bfloat16",
                 {{"Eigen", eigen}, {"libtorch", torch_gb}}, "fp32 28 GB, fp16 14 GB, bf16 14 GB in both",
                 eigen == expected && torch_gb == expected);
  }
}

// Updates: a small update on a weight of 1, once and many times; why master weights stay float32.
void observe_weight_updates(int update_steps, speedlabs::Report& report) {
  {
    const auto w = fp16("fp16: weight 1 + update 1e-4", add(1.0f, 1e-4f), add_tensor(1.0f, 1e-4f));
    report.check("fp16_update_1e-4_on_1_is_lost",
                 "a float16 weight of 1 does not move when 1e-4 is added: its next value is 1 + 2^-10 (about "
                 "0.001), and 1e-4 is less than half that step",
                 w.measured(), agree_and("the sum == 1"), w.agree() && w.value() == 1.0f);
  }
  {
    const auto w =
        fp32("fp32: weight 1 + update 1e-4", add_in<float>(1.0f, 1e-4f), add_in_tensor(1.0f, 1e-4f, at::kFloat));
    // One float32 rounding at 1 is at most half a step, 2^-24; 2^-23 leaves room for 1e-4's own rounding.
    report.check("fp32_update_1e-4_on_1_is_kept",
                 "a float32 weight of 1 does move when 1e-4 is added: float32 steps near 1 are 2^-23", w.measured(),
                 agree_and("the sum != 1 and is within 2^-23 of 1.0001"),
                 w.agree() && w.value() != 1.0f && std::abs(w.value() - 1.0001) <= std::ldexp(1.0, -23));
  }
  {
    const auto w = bf16("bf16: weight 1 + update 1e-4", add(1.0f, 1e-4f), add_tensor(1.0f, 1e-4f));
    report.check("bf16_update_1e-4_on_1_is_lost",
                 "bfloat16 loses the update too (its step at 1 is 2^-7): master weights stay float32 with "
                 "either 16-bit type",
                 w.measured(), agree_and("the sum == 1"), w.agree() && w.value() == 1.0f);
  }
  {
    const int n = update_steps;
    const std::string label = std::to_string(n) + " updates of 1e-4 on 1";
    const auto accumulate = [n](auto type) { return accumulate_updates<decltype(type)>(1.0f, 1e-4f, n); };
    const auto accumulate_tensor = [n](c10::ScalarType t) { return accumulate_in_tensor(1.0f, 1e-4f, n, t); };
    const auto w16 = fp16("fp16: " + label, accumulate, accumulate_tensor);
    const auto wb16 = bf16("bf16: " + label, accumulate, accumulate_tensor);
    const auto w32 = fp32("fp32: " + label, accumulate_updates<float>(1.0f, 1e-4f, n),
                          accumulate_in_tensor(1.0f, 1e-4f, n, at::kFloat));
    // Each float32 addition rounds by at most half a step; below 16 (n <= 100000) a step is at most
    // 2^-20, so n additions drift by at most n * 2^-21, under 1% of the n * 1e-4 they add.
    const double gained = w32.value() - 1.0;
    const double expected_gain = n * 1e-4;
    report.check("fp16_weight_stalls_fp32_weight_learns",
                 "training with weights kept in 16 bits silently stops: the fp16 and bf16 weights never leave 1, "
                 "while a float32 master weight gains every update",
                 {{"fp16", w16.measured()}, {"bf16", wb16.measured()}, {"fp32", w32.measured()}},
                 agree_and("fp16 == bf16 == 1, fp32 gains n * 1e-4 within 1%"),
                 w16.agree() && wb16.agree() && w32.agree() && w16.value() == 1.0f && wb16.value() == 1.0f &&
                     std::abs(gained - expected_gain) <= 0.01 * expected_gain);
  }
}

// Gradients: a 1e-8 gradient in float16 and bfloat16, and what loss scaling does for it.
void observe_small_gradients(speedlabs::Report& report) {
  {
    const auto w = fp16("fp16: store gradient 1e-8", store(1e-8f), store_tensor(1e-8f));
    report.check("fp16_gradient_1e-8",
                 "a gradient of 1e-8 becomes 0 in float16: everything below half its smallest subnormal 2^-24, "
                 "i.e. below 2^-25 (about 3e-8), rounds to zero",
                 w.measured(), agree_and("the stored value == 0"), w.agree() && w.value() == 0.0f);
  }
  {
    // GradScaler's default starting scale is 2^16: scaled, stored in fp16, then unscaled in float32.
    constexpr float kScale = 65536.0f;
    const auto unscale = [](auto&& stored) { return [=](auto in) { return stored(in) / kScale; }; };
    const auto w = fp16("fp16: gradient 1e-8 * 65536, back", unscale(store(1e-8f * kScale)),
                        unscale(store_tensor(1e-8f * kScale)));
    // 6.6e-4 is a normal float16, so it is stored within half a step: 2^-11 relative.
    const double relative_error = std::abs(w.value() - 1e-8) / 1e-8;
    report.check("fp16_gradient_scaled_65536_survives",
                 "what a GradScaler does: the same gradient multiplied by 65536 before it is stored in float16, "
                 "and divided in float32 afterwards, survives",
                 w.measured(), agree_and("within 2^-11 relative of 1e-8"),
                 w.agree() && relative_error <= std::ldexp(1.0, -11));
  }
  {
    const auto w = bf16("bf16: store gradient 1e-8", store(1e-8f), store_tensor(1e-8f));
    const double relative_error = std::abs(w.value() - 1e-8) / 1e-8;
    report.check("bf16_gradient_1e-8_is_kept",
                 "bfloat16 keeps a 1e-8 gradient without scaling (float32's range), at 8 significant bits",
                 w.measured(), agree_and("within 2^-8 relative of 1e-8"),
                 w.agree() && relative_error <= std::ldexp(1.0, -8));
  }
}

}  // namespace

void run(const Config& config, speedlabs::Report& report) {
  print_format_table(format_table(Library::libtorch), std::cout);
  std::cout << "\nThe lesson's experiments, in your rounding (exercise.cpp), Eigen's type, libtorch's type and a "
               "libtorch tensor:\n";
  observe_rounding_and_range(report);
  observe_storage_size(report);
  observe_weight_updates(config.update_steps, report);
  observe_small_gradients(report);
  observe_low_precision_updates(config.update_steps, report);
  observe_format_table(report);
  observe_fp8_formats(report);
}

}  // namespace lab02
