/// @file labs/12_fusion/src/memory_claims.h
/// @brief Lab 12's memory claims (the chunked head's extra peak against the plain one's, alone and inside GPT-2's
/// training step), and the sizes at which they must hold: a chunk as large as the batch saves nothing, and
/// the weight's gradient, which both heads make, can outweigh a small batch's logits.
#pragma once
#include <cstdint>
#include <string>

#include "common/gpt_config.h"
#include "common/observations.h"
#include "experiment.h"

namespace lab12 {

/// A memory claim must hold only where the sizes predict it with this factor to spare on the chunked side.
inline constexpr double kPeakPredictionMargin = 1.25;

/// The extra peak of one forward and backward of each head, in float32 numbers, predicted from the sizes and the
/// reference's tensors.
struct PredictedPeak {
  /// The plain head: the (rows, V) logits, their log-softmax and the logits' gradient, 3 x rows x V.
  double plain = 0;
  /// The chunked head, with c = min(chunk, rows): the forward holds a chunk's logits and logsumexp's
  /// exponentials of them (2 c V); the backward a chunk's softmax beside the weight's float32 gradient
  /// (c V + V C). The larger of the two; nothing grows with rows.
  double chunked = 0;
};

/// See PredictedPeak. @p width is C, @p vocab V.
PredictedPeak predicted_peak(int64_t rows, int64_t chunk, int64_t width, int64_t vocab);

/// Why peak_memory_vs_plain is only reported at these sizes, or "" when it must hold: where the predicted
/// chunked peak, times kPeakPredictionMargin, is at most kPeakShareLimit of the plain one's.
std::string peak_claim_exemption(int64_t rows, int64_t chunk, int64_t width, int64_t vocab);

/// Why gpt_step_with_chunked_head's memory part is only reported, or "" when it must hold: where the predicted
/// saving, with kPeakPredictionMargin on the chunked side, is at least the logits' rows x V.
std::string gpt_peak_claim_exemption(int64_t rows, int64_t chunk, int64_t width, int64_t vocab);

/// Records peak_memory_vs_plain from @p results' sweep (must hold where peak_claim_exemption() is empty).
void observe_peak_memory(const Config& config, const Results& results, const speedlabs::gpt::GPTConfig& model,
                         speedlabs::Report& report);

/// Records gpt_step_with_chunked_head: the same losses (must hold), and a steady step's peak lower by at least
/// the logits' size (must hold where gpt_peak_claim_exemption() is empty).
void observe_gpt_step(const Config& config, const Results& results, const speedlabs::gpt::GPTConfig& model,
                      speedlabs::Report& report);

}  // namespace lab12
