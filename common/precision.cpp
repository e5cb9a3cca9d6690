#include "common/precision.h"

#include <ATen/Context.h>
#include <torch/types.h>

namespace speedlabs {

const EnumNames<Precision>& precision_names() {
  static const EnumNames<Precision> names(
      "precision",
      {{Precision::fp32, "fp32"}, {Precision::tf32, "tf32"}, {Precision::bf16, "bf16"}, {Precision::fp16, "fp16"}});
  return names;
}

const std::vector<Precision>& all_precisions() { return precision_names().values(); }

std::string to_string(Precision p) { return precision_names().name(p); }

Precision parse_precision(const std::string& name) { return precision_names().parse(name); }

std::string current_matmul_precision() {
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGHEST:
      return "highest";
    case at::Float32MatmulPrecision::HIGH:
      return "high";
    case at::Float32MatmulPrecision::MEDIUM:
      return "medium";
  }
  return "highest";
}

MatmulPrecisionScope::MatmulPrecisionScope(const std::string& torch_name) : previous_(current_matmul_precision()) {
  at::globalContext().setFloat32MatmulPrecision(torch_name);
}

MatmulPrecisionScope::~MatmulPrecisionScope() { at::globalContext().setFloat32MatmulPrecision(previous_); }

void prepare_vector_math() {
  // One element: too small for libtorch to split, so the library's first call runs here, on one thread.
  torch::ones({1}).exp();
}

}  // namespace speedlabs
