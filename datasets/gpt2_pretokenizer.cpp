// The Unicode class table of GPT-2's pattern (gpt2_pretokenizer.h), from the ranges tiktoken's engine gives.
#include "datasets/gpt2_pretokenizer.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <string>

namespace datasets::gpt2_internal {

namespace {
struct CodePointRange {
  uint32_t first, last;  // inclusive
};
#include "datasets/gpt2_unicode_classes.inc"
}  // namespace

ClassTable::ClassTable() {
  std::vector<uint8_t> all(0x110000, kOther);
  auto mark = [&](const CodePointRange* ranges, size_t count, CharClass cls) {
    for (size_t i = 0; i < count; ++i) std::fill(&all[ranges[i].first], &all[ranges[i].last] + 1, cls);
  };
  mark(kLetterRanges, std::size(kLetterRanges), kLetter);
  mark(kNumberRanges, std::size(kNumberRanges), kNumber);
  mark(kWhiteSpaceRanges, std::size(kWhiteSpaceRanges), kSpace);
  std::map<std::string, uint16_t> seen;
  index_.resize(0x1100);
  for (size_t block = 0; block < index_.size(); ++block) {
    std::string bytes(reinterpret_cast<const char*>(&all[block << 8]), 256);
    const auto [it, added] = seen.emplace(bytes, static_cast<uint16_t>(seen.size()));
    if (added) blocks_.insert(blocks_.end(), bytes.begin(), bytes.end());
    index_[block] = it->second;
  }
  for (uint32_t c = 0; c < 128; ++c) ascii_[c] = all[c];
}

const ClassTable& char_classes() {
  static const ClassTable table;
  return table;
}

}  // namespace datasets::gpt2_internal
