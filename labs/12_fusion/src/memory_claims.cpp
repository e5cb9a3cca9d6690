#include "memory_claims.h"

#include <algorithm>
#include <cmath>

#include "common/format.h"

namespace lab12 {

using speedlabs::fixed;
using speedlabs::scientific;

namespace {

double mib_of(int64_t bytes) { return speedlabs::to_mib(static_cast<double>(bytes)); }

// "chunks of c rows against B x T = R, C = w": the sizes a prediction came from.
std::string sizes_text(int64_t rows, int64_t chunk, int64_t width) {
  return "chunks of " + std::to_string(chunk) + " rows, B x T = " + std::to_string(rows) +
         ", C = " + std::to_string(width);
}

}  // namespace

PredictedPeak predicted_peak(int64_t rows, int64_t chunk, int64_t width, int64_t vocab) {
  const double r = static_cast<double>(rows), c = static_cast<double>(std::min(chunk, rows));
  const double v = static_cast<double>(vocab), w = static_cast<double>(width);
  return {3 * r * v, std::max(2 * c, c + w) * v};
}

std::string peak_claim_exemption(int64_t rows, int64_t chunk, int64_t width, int64_t vocab) {
  const PredictedPeak p = predicted_peak(rows, chunk, width, vocab);
  const double share = kPeakPredictionMargin * p.chunked / p.plain;
  if (share <= kPeakShareLimit) return "";
  return sizes_text(rows, chunk, width) + " predict a share of " + fixed(p.chunked / p.plain, 2) +
         ": too close to the batch's logits, or to the weight's gradient, for a quarter";
}

std::string gpt_peak_claim_exemption(int64_t rows, int64_t chunk, int64_t width, int64_t vocab) {
  const PredictedPeak p = predicted_peak(rows, chunk, width, vocab);
  const double logits = static_cast<double>(rows) * static_cast<double>(vocab);
  if (p.plain - kPeakPredictionMargin * p.chunked >= logits) return "";
  return sizes_text(rows, chunk, width) + " predict a saving of " + fixed((p.plain - p.chunked) / logits, 2) +
         " x the logits, too close to one";
}

void observe_peak_memory(const Config& config, const Results& r, const speedlabs::gpt::GPTConfig& model,
                         speedlabs::Report& report) {
  nlohmann::json sizes = nlohmann::json::array();
  for (const auto& p : r.peaks) {
    sizes.push_back({{"rows", p.rows},
                     {"logits_MiB", mib_of(p.logits_bytes)},
                     {"plain_MiB", mib_of(p.plain_bytes)},
                     {"chunked_MiB", mib_of(p.chunked_bytes)}});
  }
  const auto& largest = r.peaks.back();
  const double share =
      static_cast<double>(largest.chunked_bytes) / static_cast<double>(std::max<int64_t>(largest.plain_bytes, 1));
  const std::string exemption = peak_claim_exemption(largest.rows, config.chunk, model.n_embd, model.vocab_size);
  const std::string rule = "chunked / plain <= " + fixed(kPeakShareLimit, 2) + " at the largest B x T";
  report.check("peak_memory_vs_plain",
               "extra peak memory of one forward + backward: the plain head's grows with B x T x V, the chunked "
               "one's with chunk x V; at the largest B x T (" +
                   std::to_string(largest.rows) + ") the chunked one's is at most a quarter of the plain one's",
               {{"sizes", sizes}, {"share_at_largest", share}},
               exemption.empty() ? rule : "reported (" + exemption + "); " + rule, share <= kPeakShareLimit,
               /*must_hold=*/exemption.empty());
}

void observe_gpt_step(const Config& config, const Results& r, const speedlabs::gpt::GPTConfig& model,
                      speedlabs::Report& report) {
  double worst = 0;
  for (size_t i = 0; i < r.plain_gpt_losses.size(); ++i) {
    worst = std::max(worst, std::abs(r.plain_gpt_losses[i] - r.chunked_gpt_losses[i]));
  }
  const int64_t rows = config.batch * config.seq;
  const int64_t logits_bytes = rows * model.vocab_size * 4;
  const bool peak_lower = r.plain_gpt_peak - r.chunked_gpt_peak >= logits_bytes;
  // The losses must agree at any size; the peak only where the sizes predict the saving.
  const std::string exemption = gpt_peak_claim_exemption(rows, config.chunk, model.n_embd, model.vocab_size);
  const std::string peak_rule = "plain peak - chunked peak >= B x T x V x 4 bytes";
  report.check("gpt_step_with_chunked_head",
               "lab 05's GPT-2 (" + config.model + ", float32, AdamW) trained " + std::to_string(config.gpt_steps) +
                   " steps at B = " + std::to_string(config.batch) + ", T = " + std::to_string(config.seq) +
                   " with the chunked head gives the plain head's losses, with a steady step's peak lower by at "
                   "least the logits' size",
               {{"plain_losses", r.plain_gpt_losses},
                {"chunked_losses", r.chunked_gpt_losses},
                {"max_loss_difference", worst},
                {"plain_peak_MiB", mib_of(r.plain_gpt_peak)},
                {"chunked_peak_MiB", mib_of(r.chunked_gpt_peak)},
                {"logits_MiB", mib_of(logits_bytes)},
                {"peak_lower_by_logits", peak_lower}},
               "|loss difference| <= " + scientific(kGptLossAtol, 0) + " per step; " +
                   (exemption.empty() ? peak_rule : "the peak reported (" + exemption + "): " + peak_rule),
               worst <= kGptLossAtol && (peak_lower || !exemption.empty()));
}

}  // namespace lab12
