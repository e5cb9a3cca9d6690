// The Python peer (peer.h): reference/speedrun_peer.py spoken to a line at a time.
#include "peer.h"

#include <ATen/Parallel.h>
#include <unistd.h>

#include <filesystem>

#include "common/build_paths.h"
#include "common/errors.h"
#include "common/gpt.h"
#include "common/tensor_file.h"
#include "recipe.h"

namespace lab13 {

namespace gpt = speedlabs::gpt;

namespace {

// A step is tens of milliseconds and torch.compile's first step a minute or so: far under these.
constexpr double kInitTimeoutS = 300;
constexpr double kStepTimeoutS = 600;

// What speedrun_peer.py reads: the model's and the recipe's numbers, the stream, the initial weights.
std::string peer_state(const TrainerConfig& c) {
  const Recipe& r = c.recipe;
  gpt::NamedTensors state;
  state.emplace_back("config", torch::tensor({c.model.block_size, c.model.vocab_size, c.model.n_layer, c.model.n_head,
                                              c.model.n_embd, r.batch, r.seq, int64_t{at::get_num_threads()},
                                              int64_t{r.warmup_steps}, int64_t{r.decay_steps}},
                                             torch::kLong));
  state.emplace_back("recipe",
                     torch::tensor({r.lr, r.min_lr, r.beta1, r.beta2, r.weight_decay, r.grad_clip}, torch::kFloat));
  state.emplace_back("train", torch::tensor(*c.train_tokens, torch::kLong));
  state.emplace_back("offsets", window_offsets(c.seed, std::max(c.max_steps, 1), r.batch,
                                               static_cast<int64_t>(c.train_tokens->size()), r.seq));
  torch::manual_seed(c.seed);  // as RecipeTrainer::init: the baseline's initial weights
  const gpt::GPT model(c.model);
  for (const auto& p : model->named_parameters()) state.emplace_back("param/" + p.key(), p.value().detach());
  return gpt::encode_tensor_file(state);
}

}  // namespace

PythonPeer::PythonPeer(const std::string& python, bool compiled, const TrainerConfig& config)
    : state_(std::make_unique<speedlabs::UnnamedFile>(peer_state(config), "speedlabs-lab13")),
      weights_path_((std::filesystem::temp_directory_path() /
                     ("speedlabs-lab13-" + std::to_string(getpid()) + (compiled ? "-compiled" : "-eager")))
                        .string()) {
  std::vector<std::string> argv = {python, speedlabs::source_dir() + "/reference/speedrun_peer.py", state_->path(),
                                   weights_path_};
  if (compiled) argv.push_back("--compile");
  child_ = std::make_unique<speedlabs::LineChild>(
      argv, std::vector<std::pair<std::string, std::string>>{{"PYTHONDONTWRITEBYTECODE", "1"}});
}

PythonPeer::~PythonPeer() {
  if (child_) {
    try {
      child_->send("quit");
    } catch (const std::exception&) {  // it has gone already: the destructor below reaps it
    }
  }
  child_.reset();
  std::error_code ignored;
  std::filesystem::remove(weights_path_, ignored);
  std::filesystem::remove(weights_path_ + ".partial", ignored);
}

namespace {

void ask(speedlabs::LineChild& child, const std::string& request, const std::string& expected, double timeout_s) {
  child.send(request);
  const std::string answer = child.answer("peer ", timeout_s);
  if (answer != expected) throw speedlabs::RuntimeFailure("the Python peer: " + answer.substr(5) + child.chatter());
}

}  // namespace

void PythonPeer::init(const TrainerConfig&) { ask(*child_, "init", "peer ready", kInitTimeoutS); }

void PythonPeer::step() { ask(*child_, "step", "peer stepped", kStepTimeoutS); }

gpt::NamedTensors PythonPeer::weights() {
  ask(*child_, "weights", "peer weights", kStepTimeoutS);
  return gpt::read_tensor_file(weights_path_);
}

}  // namespace lab13
