/// @file labs/03_mixed_precision/src/bf16_weights.h
/// @brief Lab 03, below 16 bits: a tiny GPT trained with its weights stored in bf16, four ways from the same
/// seed and batches: float32 weights (the reference), bf16 rounded to nearest, bf16 rounded stochastically
/// (lab 02's exercise float_to_bfloat16_bits_stochastic) and bf16 with a bf16 Kahan compensation buffer.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/observations.h"
#include "experiment.h"

namespace lab03 {

/// How each run stores its weights after an update.
enum class WeightStorage { fp32, bf16_nearest, bf16_stochastic, bf16_kahan };

/// The four storages in the order the lab prints them.
inline constexpr WeightStorage kWeightStorages[] = {WeightStorage::fp32, WeightStorage::bf16_nearest,
                                                    WeightStorage::bf16_stochastic, WeightStorage::bf16_kahan};

/// The storage's name in the table and the JSON ("fp32", "bf16_nearest", ...).
/// @param storage  the storage
/// @return         its name
std::string to_string(WeightStorage storage);

/// Adam's learning rate for the bf16-weight runs. Adam's steps are about this size, below half a bf16 step
/// (bf16 keeps 8 significant bits) of every weight from 0.125 up: LayerNorm's weights of 1 never move.
inline constexpr double kBf16WeightsLearningRate = 3e-4;

/// One run's loss at every step.
struct Bf16WeightsRun {
  WeightStorage storage = WeightStorage::fp32;  ///< how the weights were stored
  std::vector<double> losses;                   ///< the training loss of each step
};

/// Trains the tiny GPT (common/gpt.h, 256 byte tokens, 64-token sequences) on tiny shakespeare's bytes on the
/// CPU for config.steps steps of Adam. Every run starts from the same bf16-rounded initial weights and sees the
/// same batches; the update is computed in float32 from the stored weight and the gradient, and the new weight
/// (stored weight + update, in float32) is stored back by @p storage.
/// @param config   steps and seed (the data comes from $SPEEDLABS_DATA_DIR)
/// @param storage  how the weights are stored
/// @return         the losses
Bf16WeightsRun train_with_weight_storage(const Config& config, WeightStorage storage);

/// The relative tolerance within which stochastic rounding and Kahan must end near float32's final loss:
/// measured over the 60-step --quick run, both end within 0.05% of float32 and round to nearest about 1.2% behind;
/// 0.5% leaves ten times the measured gap and still tells the two apart from round to nearest.
inline constexpr double kBf16LossTolerance = 0.005;

/// Runs the four storages, prints their losses and records bf16_weights_losses,
/// stochastic_rounding_tracks_fp32_loss and kahan_tracks_fp32_loss.
/// @param config  the lab's knobs
/// @param report  where the observations go
void observe_bf16_weights(const Config& config, speedlabs::Report& report);

}  // namespace lab03
