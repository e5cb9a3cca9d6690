// Fuzzes GPT-2's tokenizer with arbitrary bytes. Properties (gpt2_tokenizer.h): encode never fails, every id
// is a token, decode(encode(bytes)) == bytes with or without <|endoftext|> as a special token; the pieces of
// pretokenize() are not empty and make up the input, and encoding them (with and without the word cache) gives
// encode()'s ids; and for inputs up to 512 bytes, the ids are those of the slow literal reference
// (tests/datasets/reference_tokenizer.h: the pattern run with backtracking, a merge that rescans every pair).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tests/datasets/reference_tokenizer.h"
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
  const auto pieces = tokenizer.pretokenize(text);
  std::string joined;
  for (const std::string_view piece : pieces) {
    if (piece.empty()) fuzz::violated("an empty piece");
    joined += piece;
  }
  if (joined != text) fuzz::violated("the pieces do not make up the input");
  if (tokenizer.count_pieces(text) != pieces.size()) fuzz::violated("count_pieces differs from pretokenize");
  const auto ids = tokenizer.encode(text);
  if (tokenizer.encode_pieces(pieces, true) != ids) fuzz::violated("encode_pieces (cached) differs from encode");
  if (tokenizer.encode_pieces(pieces, false) != ids) fuzz::violated("encode_pieces (uncached) differs from encode");
  if (size <= 512) {  // the reference is quadratic in a piece: keep each run fast
    static const speedlabs::testing::ReferenceGPT2 reference(tokenizer);
    if (reference.encode(text) != ids) fuzz::violated("differs from the slow reference");
  }
  return 0;
}
