#include "experiment.h"

#include <cmath>
#include <iostream>

#include "common/errors.h"
#include "common/files.h"
#include "common/format.h"
#include "common/host_memory.h"
#include "common/process.h"
#include "datasets/data_files.h"
#include "outputs.h"
#include "peer.h"
#include "recipe.h"

namespace lab13 {

using speedlabs::fixed;
namespace gpt = speedlabs::gpt;

gpt::GPTConfig model_of(const Config& config) {
  gpt::GPTConfig model;
  model.n_layer = config.n_layer;
  model.n_embd = config.n_embd;
  model.n_head = config.n_head;
  model.block_size = config.block;
  model.vocab_size = kVocabulary;
  require_within_limits(model);
  return model;
}

void check_config(const Config& config) {
  const gpt::GPTConfig model = model_of(config);
  model.require_sequence_fits(config.recipe.seq, "--seq " + std::to_string(config.recipe.seq));
  const double ln_vocab = std::log(static_cast<double>(model.vocab_size));
  if (!(config.target >= kLowestTarget && config.target < ln_vocab)) {
    throw speedlabs::UsageError("--target " + fixed(config.target, 2) + ": give a validation loss from " +
                                fixed(kLowestTarget, 1) + " (below it no model within the limits gets in a run) " +
                                "to under " + fixed(ln_vocab, 2) + " (ln 65, where an untrained model starts)");
  }
  if (config.step_cap > 100000) throw speedlabs::UsageError("--step-cap: at most 100000 steps");
  if (config.recipe.batch > 256) throw speedlabs::UsageError("--batch: at most 256 sequences");
  if (!config.python.empty()) speedlabs::require_program(config.python, "--python");
  if (!config.plots_dir.empty()) speedlabs::require_output_folder(config.plots_dir);
  if (!config.record_to.empty()) require_record_writable(config.record_to);
}

namespace {

Contender contender(const std::string& name, std::unique_ptr<Trainer> trainer, const Config& config,
                    const Split& split) {
  Contender c;
  c.name = name;
  c.trainer = std::move(trainer);
  c.config.model = model_of(config);
  c.config.recipe = config.recipe;
  c.config.seed = config.seed;
  c.config.max_steps = config.step_cap;
  c.config.train_tokens = split.train;
  return c;
}

// A Python peer of the baseline; one that cannot start stays out of the race, with the reason.
Contender peer(const std::string& name, bool compiled, const Config& config, const Split& split) {
  Contender c = contender(name, nullptr, config, split);
  try {
    c.trainer = std::make_unique<PythonPeer>(config.python, compiled, c.config);
  } catch (const std::exception& e) {
    c.done = true;
    c.failure = std::string("did not start: ") + e.what();
  }
  return c;
}

}  // namespace

Outcome race_once(const Config& config, const std::function<std::unique_ptr<Trainer>()>& make) {
  Outcome o;
  o.split = split_tokens(load_characters(datasets::resolve_data_dir(config.data_dir)));
  o.baseline = contender("baseline", make_baseline_trainer(), config, o.split);
  o.trainer = contender("trainer", make(), config, o.split);
  std::vector<Contender*> sides = {&o.baseline, &o.trainer};
  if (!config.python.empty()) {
    o.peers.push_back(peer("python_eager", false, config, o.split));
    if (config.compiled_peer) o.peers.push_back(peer("python_compiled", true, config, o.split));
  }
  for (Contender& p : o.peers) sides.push_back(&p);
  const RaceSettings settings{config.target, config.step_cap, config.eval_every, &o.split, config.progress_bar};
  o.contention = race(sides, settings);
  for (Contender& p : o.peers) p.trainer.reset();  // the Python processes end here, not at the lab's exit
  if (!o.trainer.reached) {
    o.score_reason = "the trainer scores 0: " + o.trainer.failure;
  } else if (!o.baseline.reached) {
    o.score_reason = "no score: the baseline did not reach the target (" + o.baseline.failure + ")";
  } else {
    o.score = o.baseline.total_ms() / o.trainer.total_ms();
  }
  return o;
}

void run(const Config& config, const c10::Device& device, speedlabs::Report& report) {
  check_config(config);
  if (!device.is_cpu()) std::cout << "the speedrun runs on the CPU (the task is a CPU's)\n";
  const gpt::GPTConfig model = model_of(config);
  std::cout << "speedrun: GPT " << model.n_layer << " layers x " << model.n_embd << " wide, " << model.n_head
            << " heads, context " << model.block_size << ", " << kVocabulary
            << " characters; baseline B=" << config.recipe.batch << ", T=" << config.recipe.seq
            << "; target validation loss " << fixed(config.target, 2)
            << " over the last 10% of tiny shakespeare; validation every " << config.eval_every
            << " steps (not timed), cap " << config.step_cap << " steps\n";
  std::cout << speedlabs::keep_freed_host_memory() << "\n";  // the race's policy, for both trainers alike
  Outcome outcome = race_once(config, make_trainer);
  print_outcome(outcome);
  record_observations(outcome, config, report);
  record_ablation(outcome, config, report);
  write_outputs(outcome, config);
}

}  // namespace lab13
