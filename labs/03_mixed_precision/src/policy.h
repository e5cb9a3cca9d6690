/// @file labs/03_mixed_precision/src/policy.h
/// @brief Lab 03: autocast's per-op policy, measured op by op and held against the chapter's lists and
/// libtorch's own CPU lists.
#pragma once
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace lab03 {

/// "float32", "bfloat16", "float16", "float64", else c10's name.
/// @param dtype  the dtype
std::string dtype_name(c10::ScalarType dtype);

/// One op of chapter 9 section 5, run under autocast.
struct PolicyRow {
  std::string op;                  ///< the chapter's name, e.g. "linear", "__rpow__", "GRUCell"
  std::string call;                ///< the C++ call that ran it
  std::string chapter_policy;      ///< "lower", "float32" or "widest": the chapter's list
  std::string fp32_in;             ///< output dtype with float32 inputs
  std::string low_in;              ///< output dtype with low-precision inputs ("error": no kernel for them)
  std::string mixed_in;            ///< output dtype with one float32 input and the others low ("" if not probed)
  std::string measured_policy;     ///< "lower", "float32", "widest" or "inputs" (autocast left the dtype alone)
  std::string cpu_rule;            ///< the aten op whose AutocastCPU registration decides ("" none)
  std::string cpu_policy;          ///< the policy libtorch's CPU lists give it: lower, float32, widest or inputs
  bool matches_chapter = false;    ///< the measurement agrees with the chapter
  bool matches_cpu_lists = false;  ///< the measurement agrees with libtorch's CPU lists
  std::string note;                ///< how the C++ call relates to the Python name, or why CPU differs
};

/// Runs every op of the chapter's three lists under autocast(device, dtype) with float32, low-precision
/// and (for the promote list) mixed inputs, and classifies what happened.
/// @param device  the device
/// @param dtype   the autocast dtype
std::vector<PolicyRow> measure_policy(const c10::Device& device, c10::ScalarType dtype);

/// The same measurement for ops on no list (probes.h's unlisted_probes()), whose chapter_policy is "inputs".
/// @param device  the device
/// @param dtype   the autocast dtype
std::vector<PolicyRow> measure_unlisted_policy(const c10::Device& device, c10::ScalarType dtype);

/// The entries of libtorch's AutocastCPU lists (aten/src/ATen/autocast_mode.cpp) and whether this
/// libtorch binary really registers an AutocastCPU kernel for each.
struct CpuListCheck {
  int entries = 0;                        ///< list entries
  int registered = 0;                     ///< of those, registered in this binary
  std::vector<std::string> unregistered;  ///< entries without a kernel here
};

/// Asks the dispatcher about every entry of the embedded CPU lists.
CpuListCheck check_cpu_lists_against_dispatcher();

/// The policy libtorch's CPU lists give an aten op: "lower", "float32" or "widest" for a listed op,
/// "inputs" for one without a CPU rule (or "").
/// @param op  an aten operator name without the "aten::" prefix, e.g. "conv2d.padding"
std::string cpu_list_policy(const std::string& op);

/// True when this libtorch registers an AutocastCPU kernel for @p op ("name" or "name.overload").
/// @param op  an aten operator name without the "aten::" prefix
bool has_autocast_cpu_kernel(const std::string& op);

/// Prints the measured policy table, with libtorch's CPU rule beside each op on the CPU.
/// @param rows    what measure_policy() returned
/// @param device  where it was measured
/// @param dtype   the autocast dtype
void print_policy_table(const std::vector<PolicyRow>& rows, const c10::Device& device, c10::ScalarType dtype);

/// The rows as a JSON array (one object per op), for the observations' `measured` field.
/// @param rows  what measure_policy() returned
nlohmann::json policy_rows_to_json(const std::vector<PolicyRow>& rows);

}  // namespace lab03
