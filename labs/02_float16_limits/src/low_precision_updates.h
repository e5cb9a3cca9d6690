/// @file labs/02_float16_limits/src/low_precision_updates.h
/// @brief Lab 02: bf16 weights that still learn, without float32 master copies: stochastic rounding (your
/// float_to_bfloat16_bits_stochastic) and Kahan compensation (a second bf16 buffer for the lost low part).
#pragma once
#include <cstdint>
#include <vector>

#include "common/observations.h"

namespace lab02 {

/// How many bf16 weights the stochastic experiment updates, each with its own random stream: their mean has a
/// standard error about 1/32 of one weight's spread, about 1% of the 0.1 that 1000 updates of 1e-4 add.
inline constexpr int kStochasticWeights = 1024;

/// One weight kept in bf16 with Kahan compensation: the weight, and the part of the updates it could not hold.
struct KahanBFloat16 {
  uint16_t weight = 0;        ///< the bf16 bits the model uses
  uint16_t compensation = 0;  ///< the bf16 bits of what the last rounding of the weight dropped
};

/// Adds @p update to a Kahan pair: the sum weight + (update + compensation) is computed in float32 and rounded
/// to nearest into the weight (your float_to_bfloat16_bits); what that rounding dropped is kept, rounded to bf16
/// again, as the next compensation.
/// @param pair    the weight and its compensation, updated in place
/// @param update  what the optimizer adds (float32)
void kahan_add(KahanBFloat16& pair, float update);

/// The value of bf16 bits, exactly.
/// @param bits  any bf16 bit pattern
/// @return      its float value
float bfloat16_value(uint16_t bits);

/// The same weight updated @p steps times by @p update in four ways; the update is float32 (learning rate
/// times gradient) and each new weight is the float32 sum of the stored weight and the update, stored again.
struct UpdateRun {
  float fp32 = 0;                 ///< a float32 weight (a master copy)
  float nearest = 0;              ///< bf16, rounded to nearest every step (your float_to_bfloat16_bits)
  std::vector<float> stochastic;  ///< kStochasticWeights bf16 weights, each rounded stochastically every step
  KahanBFloat16 kahan;            ///< bf16 with a bf16 compensation buffer
};

/// Runs the four ways from @p weight.
/// @param weight  the starting weight (e.g. 1)
/// @param update  each step's update (e.g. 1e-4)
/// @param steps   how many updates (0 or more)
/// @param seed    seeds the random streams of the stochastic weights
/// @return        the final weights
UpdateRun run_updates(float weight, float update, int steps, uint32_t seed);

/// The worst case of a Kahan pair's distance from the float32 weight after @p steps updates that end near
/// @p magnitude: per step, the bf16 compensation loses at most half its own bf16 step (2^-9 of a bf16 step of
/// the weight) and the float32 sums round by 1.5 float32 steps at most; at the end, the weight alone lacks
/// its compensation, at most half a bf16 step.
/// @param steps      how many updates
/// @param magnitude  the largest weight reached (the steps of both formats grow with it)
/// @return           the bound
double kahan_bound(int steps, double magnitude);

/// Prints the four ways side by side and records round_to_nearest_loses_update, stochastic_rounding_unbiased,
/// kahan_bf16_tracks_fp32 and bytes_per_parameter.
/// @param steps   how many updates of 1e-4 on a weight of 1 (1 to 100000)
/// @param report  where the observations go
void observe_low_precision_updates(int steps, speedlabs::Report& report);

}  // namespace lab02
