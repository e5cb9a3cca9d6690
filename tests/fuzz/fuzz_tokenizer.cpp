// Fuzzes GPT-2's tokenizer with arbitrary bytes. Properties (gpt2_tokenizer.h): encode never fails,
// every id is a token, and decode(encode(bytes)) == bytes, with or without <|endoftext|> as a special token.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto& tokenizer = fuzz::tokenizer();
  for (const bool special : {false, true}) {
    const auto ids = special ? tokenizer.encode_allowing_special(text) : tokenizer.encode(text);
    for (const int32_t id : ids) {
      if (id < 0 || id >= datasets::GPT2Tokenizer::kVocabSize) fuzz::violated("id out of range: " + std::to_string(id));
    }
    if (tokenizer.decode(ids) != text) fuzz::violated(special ? "round trip with specials" : "round trip");
  }
  return 0;
}
