#include "experiment.h"

#include <cmath>
#include <iostream>

#include "baseline.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/format.h"
#include "common/host_memory.h"
#include "datasets/data_files.h"
#include "datasets/token_cache.h"
#include "outputs.h"

namespace lab13 {

using speedlabs::fixed;
namespace gpt = speedlabs::gpt;

gpt::GPTConfig model_of(const Config& config) {
  gpt::GPTConfig model;
  model.n_layer = config.n_layer;
  model.n_embd = config.n_embd;
  model.n_head = config.n_head;
  model.block_size = config.block;
  require_within_limits(model);
  return model;
}

void check_config(const Config& config) {
  const gpt::GPTConfig model = model_of(config);
  model.require_sequence_fits(config.seq, "--seq " + std::to_string(config.seq));
  const double ln_vocab = std::log(static_cast<double>(model.vocab_size));
  if (!(config.target >= kLowestTarget && config.target < ln_vocab)) {
    throw speedlabs::UsageError("--target " + fixed(config.target, 2) + ": give a validation loss from " +
                                fixed(kLowestTarget, 1) + " (below it no model within the limits gets in a run) " +
                                "to under " + fixed(ln_vocab, 2) + " (ln 50257, where an untrained model starts)");
  }
  if (config.step_cap > 100000) throw speedlabs::UsageError("--step-cap: at most 100000 steps");
  if (config.batch > 256) throw speedlabs::UsageError("--batch: at most 256 sequences");
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
  c.config.batch = config.batch;
  c.config.seq = config.seq;
  c.config.lr = config.lr;
  c.config.seed = config.seed;
  c.config.max_steps = config.step_cap;
  c.config.train_tokens = split.train;
  return c;
}

}  // namespace

Outcome race_once(const Config& config, const std::function<std::unique_ptr<Trainer>()>& make) {
  const auto tokens = datasets::load_shakespeare_tokens(datasets::resolve_data_dir(config.data_dir)).ids;
  Outcome o;
  o.split = split_tokens(tokens);
  o.baseline = contender("baseline", make_baseline_trainer(), config, o.split);
  o.trainer = contender("trainer", make(), config, o.split);
  const RaceSettings settings{config.target, config.step_cap, config.eval_every, &o.split, config.progress_bar};
  o.contention = race({&o.baseline, &o.trainer}, settings);
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
            << " heads, context " << model.block_size << "; B=" << config.batch << ", T=" << config.seq
            << "; target validation loss " << fixed(config.target, 2) << " over the last " << kValidationTokens
            << " tokens; validation every " << config.eval_every << " steps (not timed), cap " << config.step_cap
            << " steps\n";
  std::cout << speedlabs::keep_freed_host_memory() << "\n";  // the race's policy, for both trainers alike
  const Outcome outcome = race_once(config, make_trainer);
  print_outcome(outcome);
  record_observations(outcome, config, report);
  record_ablation(outcome, config, report);
  write_outputs(outcome, config);
}

}  // namespace lab13
