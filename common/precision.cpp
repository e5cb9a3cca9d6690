#include "common/precision.h"

#include <ATen/Context.h>

#include "common/errors.h"

namespace speedlabs {

const std::vector<Precision>& all_precisions() {
  static const std::vector<Precision> modes{Precision::fp32, Precision::tf32, Precision::bf16, Precision::fp16};
  return modes;
}

std::string to_string(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::tf32: return "tf32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
  }
  return "?";
}

Precision parse_precision(const std::string& name) {
  for (Precision p : all_precisions()) {
    if (to_string(p) == name) return p;
  }
  throw UsageError("unknown precision '" + name + "': choose fp32, tf32, bf16 or fp16");
}

std::string current_matmul_precision() {
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGHEST: return "highest";
    case at::Float32MatmulPrecision::HIGH: return "high";
    case at::Float32MatmulPrecision::MEDIUM: return "medium";
  }
  return "highest";
}

MatmulPrecisionScope::MatmulPrecisionScope(const std::string& torch_name) : previous_(current_matmul_precision()) {
  at::globalContext().setFloat32MatmulPrecision(torch_name);
}

MatmulPrecisionScope::~MatmulPrecisionScope() { at::globalContext().setFloat32MatmulPrecision(previous_); }

}  // namespace speedlabs
