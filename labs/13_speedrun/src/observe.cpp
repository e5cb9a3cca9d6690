// The speedrun's observations: both trainers reach the target, the score, the split, MFU, the ablation.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "common/format.h"
#include "common/peaks.h"
#include "common/sequential.h"
#include "common/timer.h"
#include "outputs.h"

namespace lab13 {

using speedlabs::fixed;

namespace {

// The baseline's MFU is at most this share of the CPU's theoretical float32 peak (reported). Its matmuls are 128 wide
// over 768 characters a step, and the step's other ops are memory-bound; the kept --quick run (docs/results/lab13.json)
// has the measured share.
constexpr double kBaselineMfuAtMost = 0.5;

nlohmann::json run_of(const Contender& c) {
  return {{"steps", c.steps()},
          {"seconds", c.total_ms() / 1000.0},
          {"init_s", c.init_ms / 1000.0},
          {"final_val_loss", c.curve.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.curve.back().val_loss)},
          {"reached", c.reached},
          {"failure", c.failure}};
}

void record_reached(const Contender& c, const Config& config, speedlabs::Report& report, const std::string& id,
                    const std::string& who) {
  report.check(
      id, who + " gets the evaluator's validation loss to the target within the step cap, its weights finite",
      run_of(c),
      "validation loss <= " + fixed(config.target, 2) + " within " + std::to_string(config.step_cap) + " steps",
      c.reached);
}

double median_step_ms(const Contender& c);

}  // namespace

speedlabs::Summary per_round_scores(const Outcome& o) {
  const Contender &b = o.baseline, &t = o.trainer;
  const size_t n = std::min(b.step_ms.size(), t.step_ms.size());
  // Consecutive rounds pooled into windows (up to kScoreWindow, at least kMinScoreWindows of them): single steps
  // on a busy machine scatter, and a small-batch step against a whole-batch one saw different moments of it.
  const size_t window = std::clamp<size_t>(n / kMinScoreWindows, 1, kScoreWindow);
  // Each side's steps as if every sequence had taken the window's time a sequence: a trainer's B may change.
  const auto as_if_window = [window](const Contender& c, size_t from) {
    double ms = 0, sequences = 0;
    for (size_t k = from; k < from + window; ++k) {
      ms += c.step_ms[k];
      sequences += static_cast<double>(std::max<int64_t>(c.step_batch[k], 1));
    }
    return c.init_ms + c.weights_ms + static_cast<double>(c.sequences()) * ms / sequences;
  };
  std::vector<double> scores;
  for (size_t from = 0; from + window <= n; from += window)
    scores.push_back(as_if_window(b, from) / as_if_window(t, from));
  if (scores.empty()) scores.push_back(o.score);
  return speedlabs::summarize_samples(scores);
}

namespace {

double median_step_ms(const Contender& c) {
  return c.step_ms.empty() ? 0.0 : speedlabs::summarize_samples(c.step_ms).median;
}

void record_score(const Outcome& o, speedlabs::Report& report) {
  const std::string id = "speedup_over_baseline";
  const std::string claim =
      "the score: the baseline's time to the target over the trainer's, both timed side by side in one run "
      "(init, steps and weights(); validation not timed)";
  const std::string expected = "score > 1 (faster than the baseline), reported";
  nlohmann::json measured = {{"score", o.score},
                             {"baseline_s", o.baseline.total_ms() / 1000.0},
                             {"trainer_s", o.trainer.total_ms() / 1000.0},
                             {"baseline_steps", o.baseline.steps()},
                             {"trainer_steps", o.trainer.steps()}};
  if (o.score <= 0) {
    measured["reason"] = o.score_reason;
    if (!o.trainer.reached) {
      report.check(id, claim, measured, expected, false, false).reason = o.score_reason;
    } else {
      report.not_applicable(id, claim, expected, o.score_reason, false);
    }
    return;
  }
  speedlabs::Evidence evidence(per_round_scores(o), o.contention,
                               speedlabs::LoadEffect::ratio);  // both sides CPU-bound, timed in alternating order
  evidence.bounds = {speedlabs::positive_finite("score", o.score)};
  report.decide(
      id, claim, measured, expected, evidence, [](double s) { return s > 1.0; }, false);
}

void record_split(const Outcome& o, speedlabs::Report& report) {
  const auto handed = static_cast<int64_t>(o.baseline.config.train_tokens->size());
  bool same_stream = o.trainer.config.train_tokens == o.baseline.config.train_tokens;
  for (const Contender& p : o.peers)
    same_stream = same_stream && p.config.train_tokens == o.baseline.config.train_tokens;
  const bool disjoint = o.split.train_end <= o.split.validation_begin && handed == o.split.train_end;
  // nanoGPT's boundary, int(0.9 n), of the whole text's n characters.
  const auto nine_tenths = static_cast<int64_t>(static_cast<double>(o.split.validation_end) * kTrainShare);
  const bool nanogpt_split = o.split.train_begin == 0 && o.split.train_end == nine_tenths;
  report.check("validation_never_seen",
               "every side is handed the training stream only (the first 90% of the characters): the validation "
               "split is the last 10%, a copy that only the evaluator reads",
               {{"train_tokens", {o.split.train_begin, o.split.train_end}},
                {"validation_tokens", {o.split.validation_begin, o.split.validation_end}},
                {"handed_tokens", handed},
                {"one_stream_for_all", same_stream}},
               "training [0, v), validation [v, end), v = int(90% of the characters), the stream handed ends at v",
               disjoint && same_stream && nanogpt_split);
}

void record_mfu(const Outcome& o, speedlabs::Report& report) {
  const c10::Device cpu(c10::kCPU);
  const speedlabs::TheoreticalPeak peak = speedlabs::theoretical_peak(cpu, speedlabs::PeakFormat::fp32);
  nlohmann::json measured;
  bool sane = true;
  for (const Contender* c : {&o.baseline, &o.trainer}) {
    // Every step's model FLOPs over every step's time: a trainer's B may change from step to step.
    const double step_s = std::accumulate(c->step_ms.begin(), c->step_ms.end(), 0.0) / 1000.0;
    const double per_sequence = speedlabs::gpt_model_flops_per_step(c->config.model, 1, c->config.recipe.seq);
    const double flops = per_sequence * static_cast<double>(c->sequences());
    const double mfu = speedlabs::mfu(flops, step_s, peak.flops);
    measured[c->name] = {
        {"median_step_ms", median_step_ms(*c)},
        {"tokens_per_s", step_s > 0 ? static_cast<double>(c->sequences() * c->config.recipe.seq) / step_s : 0.0},
        {"model_flops_per_step", c->steps() > 0 ? flops / c->steps() : 0.0},
        {"mfu", mfu}};
    // Only the baseline is bound to float32 and every model FLOP; a trainer in bf16 (whose peak is above
    // float32's) may pass 1 against the float32 peak. The baseline's step runs at most half of it
    // (kBaselineMfuAtMost).
    const bool within = c == &o.trainer || mfu <= kBaselineMfuAtMost;
    sane = sane && step_s > 0 && (peak.flops <= 0 || (mfu > 0 && within));
  }
  measured["peak"] = peak.what;
  report.check(
      "mfu_per_step",
      "each trainer's model FLOPs a second of its steps over the CPU's theoretical float32 peak (common/peaks), "
      "with its tokens/s",
      measured,
      "0 < MFU, and <= " + speedlabs::fixed(kBaselineMfuAtMost, 1) +
          " for the baseline (its small matmuls and memory-bound ops keep it at most half the peak), reported",
      sane, false);
}

// The Python peer's (eager or compiled) time to the target over the C++ baseline's: the same recipe, the same
// initial weights and batches, the same run.
void record_peer(const Outcome& o, const Config& config, const std::string& name, const std::string& id,
                 const std::string& what, speedlabs::Report& report) {
  const std::string claim = what +
                            " to the target over the C++ baseline's: the same recipe, initial weights and "
                            "batches, raced side by side in one run";
  const std::string expected = "reported (above 1: Python is slower)";
  const auto found = std::find_if(o.peers.begin(), o.peers.end(), [&](const Contender& p) { return p.name == name; });
  std::string why_not;
  if (config.python.empty()) why_not = "no Python with torch (--python \"\")";
  if (why_not.empty() && found == o.peers.end()) {
    why_not = "not raced: compiling takes longer than the quick race (--compiled-peer 1 races it)";
  }
  if (why_not.empty() && !found->reached) why_not = "the peer did not reach the target: " + found->failure;
  if (why_not.empty() && !o.baseline.reached) why_not = "the baseline did not reach the target";
  if (!why_not.empty()) {
    report.not_applicable(id, claim, expected, why_not, false);
    return;
  }
  const double ratio = found->total_ms() / o.baseline.total_ms();
  report.check(id, claim,
               {{"ratio", ratio},
                {"peer_s", found->total_ms() / 1000.0},
                {"peer_init_s", found->init_ms / 1000.0},
                {"baseline_s", o.baseline.total_ms() / 1000.0},
                {"peer_steps", found->steps()},
                {"baseline_steps", o.baseline.steps()}},
               expected, std::isfinite(ratio) && ratio > 0, false);
}

}  // namespace

void record_observations(const Outcome& o, const Config& config, speedlabs::Report& report) {
  record_reached(o.baseline, config, report, "baseline_reaches_target", "the lab's baseline");
  record_reached(o.trainer, config, report, "trainer_reaches_target", "your trainer");
  record_score(o, report);
  record_split(o, report);
  record_mfu(o, report);
  record_peer(o, config, "python_eager", "python_peer_vs_baseline", "the Python peer's time (PyTorch eager)", report);
  record_peer(o, config, "python_compiled", "compiled_peer_vs_baseline", "the torch.compile peer's time", report);
}

}  // namespace lab13
