// The ablation: the trainer raced against itself with one technique off, each technique in turn.
#include <iostream>

#include "common/format.h"
#include "outputs.h"

namespace lab13 {

using speedlabs::fixed;

namespace {

Contender copy_of(const Contender& full, const std::string& name, const std::string& off) {
  Contender c;
  c.name = name;
  c.trainer = make_trainer();
  c.config = full.config;
  if (!off.empty()) c.config.disabled.insert(off);
  return c;
}

}  // namespace

void record_ablation(Outcome& o, const Config& config, speedlabs::Report& report) {
  const std::string id = "ablation";
  const std::string claim =
      "each technique's share of the speed-up: the trainer raced against itself with that technique off "
      "(time without it / time with it; above 1: the technique helps)";
  const std::string expected = "each slowdown reported";
  const std::vector<std::string> techniques = o.trainer.trainer->techniques();
  std::string why_not;
  if (!config.ablation) why_not = "the ablation races the trainer once more per technique: run without --quick";
  if (why_not.empty() && techniques.empty()) why_not = "the trainer lists no technique (techniques())";
  if (why_not.empty() && !o.trainer.reached) why_not = "the trainer did not reach the target";
  if (!why_not.empty()) {
    report.not_applicable(id, claim, expected, why_not, false);
    return;
  }
  nlohmann::json measured;
  bool all_reached = true;
  const RaceSettings settings{config.target, config.step_cap, config.eval_every, &o.split, config.progress_bar};
  for (const std::string& technique : techniques) {
    std::cout << "ablation: the trainer against itself without " << technique << "\n";
    Contender full = copy_of(o.trainer, "full", "");
    Contender without = copy_of(o.trainer, "without", technique);
    race({&full, &without}, settings);
    all_reached = all_reached && full.reached && without.reached;
    measured[technique] = {{"slowdown", without.total_ms() / full.total_ms()},
                           {"with_s", full.total_ms() / 1000.0},
                           {"without_s", without.total_ms() / 1000.0},
                           {"with_steps", full.steps()},
                           {"without_steps", without.steps()},
                           {"without_reached", without.reached}};
    std::cout << "  without " << technique << ": " << fixed(without.total_ms() / 1000.0, 1) << " s against "
              << fixed(full.total_ms() / 1000.0, 1) << " s with it (" << fixed(without.total_ms() / full.total_ms(), 2)
              << "x)\n";
  }
  o.ablation = measured;
  report.check(id, claim, measured, expected + " (both runs of each race reach the target)", all_reached, false);
}

}  // namespace lab13
