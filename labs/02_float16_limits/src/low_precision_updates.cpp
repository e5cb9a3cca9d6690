#include "low_precision_updates.h"

#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>
#include <string>

#include "common/table.h"
#include "exercise.h"
#include "experiment.h"

namespace lab02 {

float bfloat16_value(uint16_t bits) {
  YourBFloat16 value;
  value.bits = bits;
  return static_cast<float>(value);
}

void kahan_add(KahanBFloat16& pair, float update) {
  const float sum = bfloat16_value(pair.weight) + (update + bfloat16_value(pair.compensation));
  pair.weight = float_to_bfloat16_bits(sum);
  // sum - weight is exact in float32: the weight is sum with its low bits rounded off.
  pair.compensation = float_to_bfloat16_bits(sum - bfloat16_value(pair.weight));
}

UpdateRun run_updates(float weight, float update, int steps, uint32_t seed) {
  UpdateRun run;
  run.fp32 = weight;
  uint16_t nearest = float_to_bfloat16_bits(weight);
  run.kahan.weight = nearest;
  for (int i = 0; i < steps; ++i) {
    run.fp32 += update;
    nearest = float_to_bfloat16_bits(bfloat16_value(nearest) + update);
    kahan_add(run.kahan, update);
  }
  run.nearest = bfloat16_value(nearest);
  std::mt19937 random(seed);
  for (int w = 0; w < kStochasticWeights; ++w) {
    uint16_t stored = float_to_bfloat16_bits(weight);
    for (int i = 0; i < steps; ++i)
      stored = float_to_bfloat16_bits_stochastic(bfloat16_value(stored) + update, random());
    run.stochastic.push_back(bfloat16_value(stored));
  }
  return run;
}

double kahan_bound(int steps, double magnitude) {
  const double binade = std::ldexp(1.0, std::ilogb(magnitude));
  const double bf16_step = binade * std::ldexp(1.0, -7);
  const double fp32_step = binade * std::ldexp(1.0, -23);
  return steps * (bf16_step * std::ldexp(1.0, -9) + 1.5 * fp32_step) + bf16_step / 2;
}

namespace {

struct MeanAndError {
  double mean = 0;
  double spread = 0;          ///< the sample standard deviation of one value
  double standard_error = 0;  ///< of the mean: spread / sqrt(n)
};

MeanAndError mean_and_error(const std::vector<float>& values) {
  MeanAndError m;
  for (float v : values) m.mean += v;
  m.mean /= values.size();
  double squares = 0;
  for (float v : values) squares += (v - m.mean) * (v - m.mean);
  m.spread = std::sqrt(squares / (values.size() - 1));
  m.standard_error = m.spread / std::sqrt(static_cast<double>(values.size()));
  return m;
}

/// Bytes each way keeps per parameter between steps, from libtorch's element sizes (optimizer state aside).
nlohmann::json bytes_per_parameter() {
  const auto bytes = [](c10::ScalarType t) { return static_cast<int>(c10::elementSize(t)); };
  const int bf16 = bytes(at::kBFloat16), fp32 = bytes(at::kFloat);
  return {{"bf16 round to nearest", bf16},
          {"bf16 stochastic rounding", bf16},
          {"bf16 Kahan (weight + compensation)", bf16 + bf16},
          {"fp32 master only", fp32},
          {"fp32 master + bf16 copy", fp32 + bf16}};
}

void print_runs(const UpdateRun& run, const MeanAndError& stochastic, const nlohmann::json& bytes) {
  speedlabs::Table table;
  table.left("weight kept as", 36).left("bytes", 7, speedlabs::fixed_digits(0)).left("final weight", 14);
  table.left("vs fp32", 0);
  const auto versus = [&](double w) { return text(w - run.fp32); };
  const float kahan = bfloat16_value(run.kahan.weight);
  table.add_row({"fp32 master only", bytes["fp32 master only"].get<double>(), text(run.fp32), "0"});
  table.add_row(
      {"bf16 round to nearest", bytes["bf16 round to nearest"].get<double>(), text(run.nearest), versus(run.nearest)});
  table.add_row({"bf16 stochastic (mean of " + std::to_string(kStochasticWeights) + ")",
                 bytes["bf16 stochastic rounding"].get<double>(), text(stochastic.mean),
                 versus(stochastic.mean) + " (standard error " + text(stochastic.standard_error) + ")"});
  table.add_row({"bf16 Kahan (weight + compensation)", bytes["bf16 Kahan (weight + compensation)"].get<double>(),
                 text(kahan), versus(kahan)});
  table.print(std::cout);
}

}  // namespace

void observe_low_precision_updates(int steps, speedlabs::Report& report) {
  constexpr float kUpdate = 1e-4f;
  const UpdateRun run = run_updates(1.0f, kUpdate, steps, /*seed=*/2026);
  const MeanAndError stochastic = mean_and_error(run.stochastic);
  const nlohmann::json bytes = bytes_per_parameter();
  std::cout << "\nbf16 weights without float32 masters: " << steps << " updates of 1e-4 on 1, in float32 arithmetic, "
            << "each sum stored again:\n";
  print_runs(run, stochastic, bytes);

  const double gain = run.fp32 - 1.0;
  report.check("round_to_nearest_loses_update",
               "a bf16 weight of 1 rounded to nearest after every float32 update of 1e-4 never moves: each sum is "
               "closer to 1 than to 1 + 2^-7, so every update is lost",
               {{"bf16 round to nearest", run.nearest}, {"fp32", run.fp32}}, "bf16 weight == 1, fp32 weight > 1",
               run.nearest == 1.0f && gain > 0);

  // Four standard errors: a fair random stream misses by more with probability 6e-5. The fp32 weight drifts
  // by float32 rounding too, but by under n * 2^-24 per unit of weight, far below the standard error.
  const double miss = std::abs(stochastic.mean - run.fp32);
  report.check("stochastic_rounding_unbiased",
               "rounded stochastically (your float_to_bfloat16_bits_stochastic), bf16 weights keep the updates on "
               "average: the mean of " +
                   std::to_string(kStochasticWeights) +
                   " weights lands on the fp32 weight, though one weight alone wanders (its spread)",
               {{"mean", stochastic.mean},
                {"standard_error", stochastic.standard_error},
                {"spread_of_one_weight", stochastic.spread},
                {"fp32", run.fp32}},
               "|mean - fp32| <= 4 standard errors, standard error > 0",
               stochastic.standard_error > 0 && miss <= 4 * stochastic.standard_error);

  const float kahan = bfloat16_value(run.kahan.weight);
  const double pair = kahan + bfloat16_value(run.kahan.compensation);
  const double bound = kahan_bound(steps, std::max<double>(kahan, run.fp32));
  report.check("kahan_bf16_tracks_fp32",
               "a bf16 weight with a bf16 compensation buffer (Kahan summation) keeps the updates, deterministically: "
               "it stays within the worst case its 8-bit compensation allows of the fp32 weight",
               {{"bf16 Kahan weight", kahan},
                {"weight + compensation", pair},
                {"fp32", run.fp32},
                {"distance", std::abs(kahan - run.fp32)},
                {"worst_case", bound}},
               "|weight - fp32| <= steps * (bf16 step * 2^-9 + 1.5 fp32 steps) + bf16 step / 2, and weight + "
               "compensation gains over half of fp32's gain",
               std::abs(kahan - run.fp32) <= bound && pair - 1.0 > gain / 2);

  report.check("bytes_per_parameter",
               "what each way keeps per parameter between steps (optimizer state aside): stochastic rounding learns "
               "in bf16's 2 bytes, Kahan in 4, against fp32 master weights' 4, or 6 with a kept bf16 copy",
               bytes, "2, 2, 4 for bf16 nearest, stochastic, Kahan; 4 and 6 for fp32 masters",
               bytes == nlohmann::json{{"bf16 round to nearest", 2},
                                       {"bf16 stochastic rounding", 2},
                                       {"bf16 Kahan (weight + compensation)", 4},
                                       {"fp32 master only", 4},
                                       {"fp32 master + bf16 copy", 6}});
}

}  // namespace lab02
