#include "race.h"

#include <unistd.h>

#include <cmath>
#include <iostream>
#include <numeric>
#include <sstream>

#include "common/format.h"
#include "common/host_memory.h"
#include "common/process.h"
#include "common/timer.h"

namespace lab13 {

using speedlabs::fixed;

double Contender::total_ms() const {
  return init_ms + weights_ms + std::accumulate(step_ms.begin(), step_ms.end(), 0.0);
}

int64_t Contender::batch() const {
  const int64_t own = trainer ? trainer->batch() : 0;
  return own > 0 ? own : config.recipe.batch;
}

int64_t Contender::sequences() const { return std::accumulate(step_batch.begin(), step_batch.end(), int64_t{0}); }

namespace {

const c10::Device kCpu(c10::kCPU);

// Validation: weights() is the trainer's code (timed), the forward pass is the evaluator's (not timed).
void validate(Contender& c, const RaceSettings& settings) {
  speedlabs::gpt::NamedTensors weights;
  c.weights_ms += speedlabs::time_once_ms([&] { weights = c.trainer->weights(); }, kCpu);
  std::string problem;
  const double loss = evaluate(c.config.model, weights, settings.split->validation, problem);
  c.curve.push_back({c.steps(), c.total_ms() / 1000.0, loss});
  if (!std::isfinite(loss)) {
    c.done = true;
    c.failure = "non-finite weights after " + std::to_string(c.steps()) + " steps (" + problem + ")";
  } else if (loss <= settings.target) {
    c.done = c.reached = true;
  } else if (c.steps() >= settings.step_cap) {
    c.done = true;
    c.failure = "the validation loss is " + fixed(loss, 3) + " after the step cap of " +
                std::to_string(settings.step_cap) + " steps, above the target " + fixed(settings.target, 2);
  }
}

// Seconds left, estimated from each running trainer's last two validations (the loss falling linearly).
std::string time_left(const std::vector<Contender*>& contenders, double target) {
  double left = 0;
  bool estimated = false;
  for (const Contender* c : contenders) {
    if (c->done) continue;
    if (c->curve.size() < 2) return "?";
    estimated = true;
    const Point& a = c->curve[c->curve.size() - 2];
    const Point& b = c->curve.back();
    const double slope = (a.val_loss - b.val_loss) / std::max(b.seconds - a.seconds, 1e-9);
    if (slope <= 0) return "?";
    left = std::max(left, (b.val_loss - target) / slope);
  }
  if (!estimated) return "?";
  return "~" + fixed(left, 0) + " s of training left";
}

// On a terminal, one line redrawn every round; elsewhere (a log, a pipe) a line after each round that validated.
void show_progress(const std::vector<Contender*>& contenders, const RaceSettings& settings, bool validated) {
  const bool terminal = isatty(STDERR_FILENO) != 0;
  if (!settings.progress_bar || (!terminal && !validated)) return;
  std::ostringstream line;
  for (const Contender* c : contenders) {
    line << c->name << " step " << c->steps() << " val "
         << (c->curve.empty() ? std::string("-") : fixed(c->curve.back().val_loss, 3)) << " at "
         << fixed(c->total_ms() / 1000.0, 1) << " s" << (c->done ? " (done)" : "") << " | ";
  }
  line << "target " << fixed(settings.target, 2) << " | " << time_left(contenders, settings.target);
  std::cerr << (terminal ? "\r\033[K  " : "  ") << line.str() << (terminal ? "" : "\n") << std::flush;
}

// Runs one of a contender's calls (true: it returned). A call that throws, or a peer that died, puts the contender
// out of the race, the failure naming that call and why.
template <typename Call>
bool attempt(Contender& c, const std::string& call, Call&& run) {
  std::string why;
  try {
    run();
    return true;
  } catch (const c10::Error& e) {
    why = e.what_without_backtrace();
  } catch (const std::exception& e) {
    why = e.what();
  }
  c.done = true;
  c.failure = call + " failed: " + why;
  return false;
}

// Round 0: init(); later rounds: a step, then a validation each time the contender has trained on another
// settings.eval_every baseline steps' worth of sequences (true: it validated). Counted in sequences, not steps, so a
// trainer with a larger B is validated as often per character it has seen, and its time to the target is no
// coarser than the baseline's.
bool take_turn(Contender& c, int round, const RaceSettings& settings) {
  if (round == 0) {
    attempt(c, "init()", [&] { c.init_ms = speedlabs::time_once_ms([&] { c.trainer->init(c.config); }, kCpu); });
    return false;
  }
  const std::string step = "step " + std::to_string(c.steps() + 1);
  if (!attempt(c, step, [&] { c.step_ms.push_back(speedlabs::time_once_ms([&] { c.trainer->step(); }, kCpu)); }))
    return false;
  c.step_batch.push_back(c.batch());
  const int64_t every = settings.eval_every * c.config.recipe.batch;
  const auto due = static_cast<int64_t>(c.curve.size() + 1) * every;
  if (c.sequences() < due && c.steps() < settings.step_cap) return false;
  attempt(c, "the validation after " + step + " (weights(), then the evaluator)", [&] { validate(c, settings); });
  return true;
}

}  // namespace

speedlabs::Contention race(std::vector<Contender*> contenders, const RaceSettings& settings) {
  speedlabs::install_stop_handlers();
  // A step frees and makes again tensors of tens to hundreds of MB: kept in the process for both trainers alike
  // (common/host_memory.h), not faulted in from the kernel every step.
  speedlabs::keep_freed_host_memory();
  const speedlabs::ContentionProbe probe;
  for (int round = 0;; ++round) {
    bool any = false;
    bool validated = false;
    for (size_t i = 0; i < contenders.size(); ++i) {
      Contender& c = *contenders[round % 2 == 0 ? i : contenders.size() - 1 - i];
      if (c.done) continue;
      any = true;
      speedlabs::stop_if_asked("in round " + std::to_string(round) + " of the race");
      validated = take_turn(c, round, settings) || validated;
    }
    show_progress(contenders, settings, validated);
    if (!any) break;
  }
  if (settings.progress_bar && isatty(STDERR_FILENO)) std::cerr << "\r\033[K" << std::flush;
  return probe.read();
}

}  // namespace lab13
