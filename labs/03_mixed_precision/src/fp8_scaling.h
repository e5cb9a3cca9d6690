/// @file labs/03_mixed_precision/src/fp8_scaling.h
/// @brief Lab 03, below 16 bits: fp8 needs a scale per tensor. The lab's own activations cast to e4m3fn raw,
/// with a scale from the tensor's current amax, and with a scale from the amax history of earlier steps.
#pragma once
#include <c10/core/ScalarType.h>
#include <torch/types.h>

#include "common/observations.h"
#include "experiment.h"

namespace lab03 {

/// How many earlier steps' amax a delayed scale looks at (Transformer Engine's default history is longer;
/// 16 steps leaves most of a short run past its warm-up).
inline constexpr int kAmaxHistory = 16;

/// What one cast of a tensor through an fp8 dtype (x * scale, cast, back, / scale) lost.
struct Fp8CastLoss {
  double saturated = 0;       ///< share of the values beyond the largest fp8 value's rounding range: clamped
  double flushed = 0;         ///< share of the non-zero values that came back 0
  double relative_error = 0;  ///< sum |x - back| / sum |x|
};

/// The largest finite value of @p dtype (448 for e4m3fn, 57344 for e5m2), from libtorch's conversion.
/// @param dtype  at::kFloat8_e4m3fn or at::kFloat8_e5m2
/// @return       the largest finite value
double fp8_max(c10::ScalarType dtype);

/// The per-tensor scale that maps @p amax onto the largest fp8 value: fp8_max / amax (1 when amax is 0).
/// @param amax   the largest absolute value the scale must fit
/// @param dtype  the fp8 dtype
/// @return       the scale
double per_tensor_scale(double amax, c10::ScalarType dtype);

/// Casts @p x * @p scale to @p dtype and back, divides by @p scale, and measures what was lost.
/// @param x      a float32 tensor
/// @param scale  the per-tensor scale
/// @param dtype  the fp8 dtype
/// @return       the shares saturated and flushed, and the relative error
Fp8CastLoss cast_through_fp8(const torch::Tensor& x, double scale, c10::ScalarType dtype);

/// The three ways over a float32 training run, each averaged over its steps.
struct Fp8ScalingRun {
  Fp8CastLoss raw;                  ///< scale 1
  Fp8CastLoss current;              ///< scale from this step's amax
  Fp8CastLoss delayed;              ///< scale from the largest amax of the previous kAmaxHistory steps
  int current_saturated_steps = 0;  ///< steps where the current scale saturated anything (0 by construction)
  int delayed_saturated_steps = 0;  ///< steps where the delayed scale saturated something
  int steps = 0;                    ///< steps with a history (the delayed scale's first step has none: skipped)
};

/// Trains the lab's MLP in float32 (Adam, the lab's learning rate) and at every step casts its first layer's
/// pre-activations to e4m3fn the three ways.
/// @param config  steps, batch, hidden, seed and device
/// @return        the averages
Fp8ScalingRun fp8_scaling_over_training(const Config& config);

/// Prints the three ways and records fp8_current_scaling_keeps_range and fp8_delayed_scaling_shares.
/// @param config  the lab's knobs
/// @param report  where the observations go
void observe_fp8_scaling(const Config& config, speedlabs::Report& report);

}  // namespace lab03
