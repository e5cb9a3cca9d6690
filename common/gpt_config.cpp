#include "common/gpt_config.h"

#include "common/errors.h"

namespace speedlabs::gpt {

GPTConfig GPTConfig::gpt2() { return GPTConfig{}; }

GPTConfig GPTConfig::tiny() {
  GPTConfig config;
  config.block_size = 128;
  config.n_layer = 2;
  config.n_head = 4;
  config.n_embd = 64;
  return config;
}

GPTConfig GPTConfig::by_name(const std::string& name) {
  if (name == "gpt2") return gpt2();
  if (name == "tiny") return tiny();
  throw UsageError("unknown model config '" + name + "': choose gpt2 or tiny");
}

void GPTConfig::require_sequence_fits(int64_t seq, const std::string& what) const {
  if (seq < 1 || seq > block_size) {
    throw UsageError(what + ": a sequence of " + std::to_string(seq) + " tokens does not fit the model, whose block " +
                     "size (longest sequence) is " + std::to_string(block_size) + "; give 1 to " +
                     std::to_string(block_size));
  }
}

}  // namespace speedlabs::gpt
