// Fuzzes the readers of the vocabulary files, encoder.json and vocab.bpe. The first byte picks which file
// the rest of the input replaces; the other one is the real file. Loading either works or throws
// speedlabs::RuntimeFailure with a message: never a crash, a hang or another exception. A tokenizer that
// loads must still round-trip a text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/files.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const auto data_dir = datasets::resolve_data_dir();
  static const auto real_encoder = datasets::require_file(data_dir, datasets::kEncoderJsonPath);
  static const auto real_merges = datasets::require_file(data_dir, datasets::kVocabBpePath);
  const auto fuzzed = fuzz::scratch() / "fuzzed";
  speedlabs::write_file_atomically(fuzzed.string(), std::string(reinterpret_cast<const char*>(data + 1), size - 1));
  const bool encoder_fuzzed = data[0] % 2 == 0;
  try {
    const auto tokenizer = datasets::GPT2Tokenizer::from_files(encoder_fuzzed ? fuzzed : real_encoder,
                                                               encoder_fuzzed ? real_merges : fuzzed);
    const std::string text = "Hello, world! 1234 \xc3\xa9t\xc3\xa9";
    if (tokenizer.decode(tokenizer.encode(text)) != text) fuzz::violated("a loaded vocabulary does not round-trip");
  } catch (const speedlabs::RuntimeFailure& e) {
    if (std::string(e.what()).empty()) fuzz::violated("an error without a message");
  }
  return 0;
}
