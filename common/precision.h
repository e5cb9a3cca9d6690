/// @file precision.h
/// @brief The four training precisions of chapter 9 by name, and a scope for torch's float32 matmul precision.
///
/// What each mode switches on in a training step is lab 05's exercise (lab05::train_step).
#pragma once
#include <string>
#include <vector>

#include "common/named_enum.h"

namespace speedlabs {

/// How a training step computes. The weights are float32 in every mode (master weights).
enum class Precision {
  fp32,  ///< plain float32 everywhere
  tf32,  ///< float32 tensors; float32 matmuls may use TF32 tensor cores (set_float32_matmul_precision("high"))
  bf16,  ///< autocast to bfloat16
  fp16   ///< autocast to float16, with a GradScaler
};

/// Every mode in the order the lessons compare them, with its name: "fp32", "tf32", "bf16", "fp16".
const EnumNames<Precision>& precision_names();

/// All modes in the order the lessons compare them.
const std::vector<Precision>& all_precisions();

/// "fp32", "tf32", "bf16", "fp16".
std::string to_string(Precision p);

/// Parses a precision name; throws UsageError for anything else.
Precision parse_precision(const std::string& name);

/// Restores the previous float32 matmul precision when it goes out of scope.
class MatmulPrecisionScope {
 public:
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

/// Lets MKL's vector math library (libtorch's exp, log, erf, tanh... on an x86 CPU) set itself up on this
/// thread, before any op calls it from several threads at once. Without it, measured with libtorch 2.13 on
/// the 2-core Intel Xeon VM: in 30 of 180 processes, the first exp that ran on two threads computed the
/// second thread's half with a relative error near 1e-4 (lab 09's first tiled backward, 3.8e-4 off in dv);
/// with it, in none of 270. Called before any experiment by run_lab (the lab programs), by each outside
/// checker's main, and before any test by every GoogleTest program on libtorch (a test environment,
/// tests/support/prepared_vector_math.cpp). The MPI workers of labs 10, 11 and 14 run one thread each.
void prepare_vector_math();

}  // namespace speedlabs
