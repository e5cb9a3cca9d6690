/// @file precision.h
/// @brief The four training precisions of chapter 9 and what each one switches on.
#pragma once
#include <c10/core/ScalarType.h>
#include <optional>
#include <string>
#include <vector>

namespace speedlabs {

/// How a training step computes. The weights are float32 in every mode (master weights).
enum class Precision {
  fp32,  ///< plain float32 everywhere
  tf32,  ///< float32 tensors; float32 matmuls may use TF32 tensor cores (set_float32_matmul_precision("high"))
  bf16,  ///< autocast to bfloat16
  fp16   ///< autocast to float16, with a GradScaler
};

/// All modes in the order the lessons compare them.
const std::vector<Precision>& all_precisions();

/// "fp32", "tf32", "bf16", "fp16".
std::string to_string(Precision p);

/// Parses a precision name; throws UsageError for anything else.
Precision parse_precision(const std::string& name);

/// The dtype autocast casts to in this mode, or nullopt when the mode does not use autocast.
std::optional<c10::ScalarType> autocast_dtype(Precision p);

/// True when the mode needs loss scaling (float16's narrow range).
bool needs_grad_scaler(Precision p);

/// Sets the float32 matmul precision for this mode: "high" (TF32 allowed) for tf32, "highest" otherwise.
/// This is the C++ face of torch.set_float32_matmul_precision.
void apply_matmul_precision(Precision p);

/// Restores the previous float32 matmul precision when it goes out of scope.
class MatmulPrecisionScope {
 public:
  /// Sets the matmul precision of @p p until the scope ends.
  /// @param p  the precision mode
  explicit MatmulPrecisionScope(Precision p);
  /// Sets torch's float32 matmul precision by name until the scope ends.
  /// @param torch_name  "highest", "high" or "medium", as torch.set_float32_matmul_precision takes it
  explicit MatmulPrecisionScope(const std::string& torch_name);
  ~MatmulPrecisionScope();
  MatmulPrecisionScope(const MatmulPrecisionScope&) = delete;
  MatmulPrecisionScope& operator=(const MatmulPrecisionScope&) = delete;

 private:
  std::string previous_;
};

/// The current float32 matmul precision as torch names it: "highest", "high" or "medium".
std::string current_matmul_precision();

}  // namespace speedlabs
