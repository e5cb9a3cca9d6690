#include "policy.h"

#include <c10/util/Exception.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <iostream>
#include <set>
#include <sstream>

#include "common/autocast_guard.h"
#include "common/table.h"
#include "probes.h"

namespace lab03 {

std::string dtype_name(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat:
      return "float32";
    case c10::kBFloat16:
      return "bfloat16";
    case c10::kHalf:
      return "float16";
    case c10::kDouble:
      return "float64";
    default:
      return c10::toString(dtype);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Measuring: every probe under autocast, classified by what came out.

namespace {

/// Swallows libtorch warnings (chain_matmul's deprecation) while the table is measured.
struct SilentWarnings : c10::WarningHandler {
  void process(const c10::Warning& /*warning*/) override {}
};

std::string output_dtype(const OpProbe& probe, const c10::Device& device, c10::ScalarType autocast_dtype,
                         c10::ScalarType first, c10::ScalarType rest) {
  ProbeInputs inputs{first, rest, device};
  try {
    speedlabs::AutocastGuard autocast(device.type(), autocast_dtype);
    return dtype_name(probe.run(inputs).scalar_type());
  } catch (const c10::Error&) {
    return "error";  // e.g. no kernel for the low-precision dtype, or mixed dtypes rejected
  }
}

PolicyRow measure_row(const OpProbe& probe, const c10::Device& device, c10::ScalarType dtype) {
  const std::string low = dtype_name(dtype);
  PolicyRow row;
  row.op = probe.op;
  row.call = probe.call;
  row.chapter_policy = probe.chapter_policy;
  row.note = probe.note;
  row.fp32_in = output_dtype(probe, device, dtype, c10::kFloat, c10::kFloat);
  row.low_in = output_dtype(probe, device, dtype, dtype, dtype);
  const bool probe_mixed = probe.chapter_policy == "widest";
  if (probe_mixed) row.mixed_in = output_dtype(probe, device, dtype, c10::kFloat, dtype);
  // The classification uses only what came out. An error with low inputs means autocast left them low.
  if (row.fp32_in == low) {
    row.measured_policy = "lower";
  } else if (row.low_in == "float32") {
    row.measured_policy = "float32";
  } else if (probe_mixed && row.mixed_in == "float32" && row.low_in != "float32") {
    row.measured_policy = "widest";
  } else {
    row.measured_policy = "inputs";
  }
  row.cpu_rule = probe.cpu_rule;
  row.cpu_policy = cpu_list_policy(probe.cpu_rule);
  row.matches_chapter = row.measured_policy == row.chapter_policy;
  // Without a CPU promote rule, how mixed inputs come out is the op's own type promotion (or an error), not
  // autocast, so only the uniform probes are held against the lists.
  const std::string uniform_policy = row.measured_policy == "widest" ? "inputs" : row.measured_policy;
  row.matches_cpu_lists =
      row.cpu_policy == "widest" ? row.measured_policy == "widest" : uniform_policy == row.cpu_policy;
  return row;
}

std::vector<PolicyRow> measure_rows(const std::vector<OpProbe>& probes, const c10::Device& device,
                                    c10::ScalarType dtype) {
  SilentWarnings silent;
  c10::WarningUtils::WarningHandlerGuard warnings(&silent);
  torch::NoGradGuard no_grad;
  std::vector<PolicyRow> rows;
  for (const auto& probe : probes) rows.push_back(measure_row(probe, device, dtype));
  return rows;
}

}  // namespace

std::vector<PolicyRow> measure_policy(const c10::Device& device, c10::ScalarType dtype) {
  return measure_rows(chapter_probes(), device, dtype);
}

std::vector<PolicyRow> measure_unlisted_policy(const c10::Device& device, c10::ScalarType dtype) {
  return measure_rows(unlisted_probes(), device, dtype);
}

void print_policy_table(const std::vector<PolicyRow>& rows, const c10::Device& device, c10::ScalarType dtype) {
  const bool cpu = device.is_cpu();
  std::cout << "\nAutocast policy measured on " << device.str() << " with dtype " << dtype_name(dtype)
            << " (inputs: all float32 / all " << dtype_name(dtype) << " / first float32, rest " << dtype_name(dtype)
            << ")\n";
  speedlabs::Table table("");
  table.left("op", 34).left("chapter", 9).left("fp32 in", 10).left("low in", 10).left("mixed in", 10);
  table.left("measured", 10).left("=ch?", 6);
  if (cpu) table.left("libtorch CPU rule -> policy", 45).left("=lib?", 0);
  table.underline(cpu ? 139 : 89);
  const auto short_name = [](const std::string& d) {
    if (d == "float32") return std::string("fp32");
    if (d == "bfloat16") return std::string("bf16");
    if (d == "float16") return std::string("fp16");
    return d;
  };
  for (const auto& r : rows) {
    std::vector<speedlabs::Cell> cells = {r.op,
                                          r.chapter_policy,
                                          short_name(r.fp32_in),
                                          short_name(r.low_in),
                                          r.mixed_in.empty() ? "-" : short_name(r.mixed_in),
                                          r.measured_policy,
                                          r.matches_chapter ? "yes" : "NO"};
    if (cpu) {
      cells.emplace_back((r.cpu_rule.empty() ? "none" : r.cpu_rule) + " -> " + r.cpu_policy);
      cells.emplace_back(r.matches_cpu_lists ? "yes" : "NO");
    }
    table.add_row(std::move(cells));
  }
  table.print(std::cout);
  std::cout << "lower: fp32 inputs come out low; float32: low inputs come out float32; widest: mixed inputs come "
               "out float32; inputs: autocast left the dtype alone.\n";
}

nlohmann::json policy_rows_to_json(const std::vector<PolicyRow>& rows) {
  nlohmann::json table = nlohmann::json::array();
  for (const auto& r : rows) {
    table.push_back({{"op", r.op},
                     {"call", r.call},
                     {"chapter", r.chapter_policy},
                     {"fp32_in", r.fp32_in},
                     {"low_in", r.low_in},
                     {"mixed_in", r.mixed_in},
                     {"measured", r.measured_policy},
                     {"cpu_rule", r.cpu_rule},
                     {"cpu_policy", r.cpu_policy},
                     {"note", r.note}});
  }
  return table;
}

}  // namespace lab03
