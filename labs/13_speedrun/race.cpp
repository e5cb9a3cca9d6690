#include "race.h"

#include <unistd.h>

#include <cmath>
#include <iostream>
#include <numeric>
#include <sstream>

#include "common/format.h"
#include "common/process.h"
#include "common/timer.h"

namespace lab13 {

using speedlabs::fixed;

double Contender::total_ms() const {
  return init_ms + weights_ms + std::accumulate(step_ms.begin(), step_ms.end(), 0.0);
}

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
  for (const Contender* c : contenders) {
    if (c->done || c->curve.size() < 2) continue;
    const Point& a = c->curve[c->curve.size() - 2];
    const Point& b = c->curve.back();
    const double slope = (a.val_loss - b.val_loss) / std::max(b.seconds - a.seconds, 1e-9);
    if (slope <= 0) return "?";
    left = std::max(left, (b.val_loss - target) / slope);
  }
  return "~" + fixed(left, 0) + " s of training left";
}

void show_progress(const std::vector<Contender*>& contenders, const RaceSettings& settings) {
  if (!settings.progress_bar || !isatty(STDERR_FILENO)) return;
  std::ostringstream line;
  for (const Contender* c : contenders) {
    line << c->name << " step " << c->steps() << " val "
         << (c->curve.empty() ? std::string("-") : fixed(c->curve.back().val_loss, 3)) << (c->done ? " (done)" : "")
         << " | ";
  }
  line << "target " << fixed(settings.target, 2) << " | " << time_left(contenders, settings.target);
  std::cerr << "\r\033[K  " << line.str() << std::flush;
}

}  // namespace

speedlabs::Contention race(std::vector<Contender*> contenders, const RaceSettings& settings) {
  speedlabs::install_stop_handlers();
  const speedlabs::ContentionProbe probe;
  for (int round = 0;; ++round) {
    bool any = false;
    for (size_t i = 0; i < contenders.size(); ++i) {
      Contender& c = *contenders[round % 2 == 0 ? i : contenders.size() - 1 - i];
      if (c.done) continue;
      any = true;
      speedlabs::stop_if_asked("in round " + std::to_string(round) + " of the race");
      if (round == 0) {
        c.init_ms = speedlabs::time_once_ms([&] { c.trainer->init(c.config); }, kCpu);
        continue;
      }
      c.step_ms.push_back(speedlabs::time_once_ms([&] { c.trainer->step(); }, kCpu));
      if (c.steps() % settings.eval_every == 0 || c.steps() >= settings.step_cap) validate(c, settings);
    }
    show_progress(contenders, settings);
    if (!any) break;
  }
  if (settings.progress_bar && isatty(STDERR_FILENO)) std::cerr << "\r\033[K" << std::flush;
  return probe.read();
}

}  // namespace lab13
