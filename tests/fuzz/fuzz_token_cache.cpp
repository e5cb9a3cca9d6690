// Fuzzes the token cache reader with damaged cache files. The input edits a valid cache file of a short
// text (overwrite bytes at an offset, truncate, append, or replace it whole); whatever the file then
// holds, load_tokens_cached must return exactly the text's encoding: a damaged cache is never used.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/files.h"
#include "datasets/token_cache.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

const std::string kText = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n";

struct Fixture {
  std::filesystem::path text_file, cache_dir, cache_file;
  std::string valid_cache;
  std::vector<int32_t> ids;
};

const Fixture& fixture() {
  static const Fixture made = [] {
    Fixture f;
    f.text_file = fuzz::scratch() / "text.txt";
    f.cache_dir = fuzz::scratch() / "cache";
    speedlabs::write_file_atomically(f.text_file.string(), kText);
    const auto first = datasets::load_tokens_cached(fuzz::tokenizer(), f.text_file, f.cache_dir);
    f.cache_file = first.cache_file;
    f.valid_cache = speedlabs::read_file(f.cache_file.string());
    f.ids = fuzz::tokenizer().encode(kText);
    return f;
  }();
  return made;
}

// The cache file the input describes: op (1 byte), offset (2 bytes, little-endian), payload (the rest).
std::string edited_cache(const uint8_t* data, size_t size) {
  std::string bytes = fixture().valid_cache;
  if (size < 3) return bytes;
  const size_t offset = (data[1] | (data[2] << 8)) % (bytes.size() + 1);
  const std::string payload(reinterpret_cast<const char*>(data + 3), size - 3);
  switch (data[0] % 4) {
    case 0:
      bytes.replace(offset, std::min(payload.size(), bytes.size() - offset), payload);
      break;
    case 1:
      bytes.resize(offset);
      break;
    case 2:
      bytes += payload;
      break;
    default:
      bytes = payload;
      break;
  }
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Fixture& f = fixture();
  speedlabs::write_file_atomically(f.cache_file.string(), edited_cache(data, size));
  const auto loaded = datasets::load_tokens_cached(fuzz::tokenizer(), f.text_file, f.cache_dir);
  if (loaded.ids != f.ids) fuzz::violated(loaded.from_cache ? "a damaged cache was used" : "the encoding changed");
  return 0;
}
