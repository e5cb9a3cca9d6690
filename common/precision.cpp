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

std::optional<c10::ScalarType> autocast_dtype(Precision p) {
  if (p == Precision::bf16) return c10::kBFloat16;
  if (p == Precision::fp16) return c10::kHalf;
  return std::nullopt;
}

bool needs_grad_scaler(Precision p) { return p == Precision::fp16; }

std::string current_matmul_precision() {
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGHEST: return "highest";
    case at::Float32MatmulPrecision::HIGH: return "high";
    case at::Float32MatmulPrecision::MEDIUM: return "medium";
  }
  return "highest";
}

namespace {

// torch's name for the float32 matmul precision of a mode: TF32 is allowed only in tf32.
const char* matmul_precision_name(Precision p) { return p == Precision::tf32 ? "high" : "highest"; }

}  // namespace

void apply_matmul_precision(Precision p) { at::globalContext().setFloat32MatmulPrecision(matmul_precision_name(p)); }

MatmulPrecisionScope::MatmulPrecisionScope(Precision p)
    : MatmulPrecisionScope(std::string(matmul_precision_name(p))) {}

MatmulPrecisionScope::MatmulPrecisionScope(const std::string& torch_name) : previous_(current_matmul_precision()) {
  at::globalContext().setFloat32MatmulPrecision(torch_name);
}

MatmulPrecisionScope::~MatmulPrecisionScope() { at::globalContext().setFloat32MatmulPrecision(previous_); }

}  // namespace speedlabs
