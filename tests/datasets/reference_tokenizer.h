/// @file tests/datasets/reference_tokenizer.h
/// @brief A slow, literal GPT-2 tokenizer to check the fast one against, with no Python: GPT-2's pattern
/// run alternative by alternative with backtracking, as a regex engine would, and the rule of tiktoken's
/// byte_pair_merge (src/lib.rs) done the simple way on byte strings, rescanning every pair after every merge. It shares
/// nothing with datasets/gpt2_tokenizer.cpp but the vocabulary (token_bytes) and the Unicode class ranges
/// (datasets/gpt2_unicode_classes.inc, which datasets.unicode_classes checks against tiktoken), looked up here
/// by binary search. Quadratic in a piece's length: keep long runs to a few hundred bytes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "datasets/gpt2_tokenizer.h"

namespace speedlabs::testing {

namespace reference_classes {
struct CodePointRange {
  uint32_t first, last;
};
#include "datasets/gpt2_unicode_classes.inc"
}  // namespace reference_classes

class ReferenceGPT2 {
 public:
  enum Class { kLetter, kNumber, kSpace, kOther };

  explicit ReferenceGPT2(const datasets::GPT2Tokenizer& vocabulary) {
    for (int32_t id = 0; id < datasets::GPT2Tokenizer::kEndOfText; ++id) ranks_[vocabulary.token_bytes(id)] = id;
  }

  static Class class_of(uint32_t c) {
    using namespace reference_classes;
    auto in = [c](const CodePointRange* begin, const CodePointRange* end) {
      const auto* at = std::upper_bound(begin, end, c, [](uint32_t v, const CodePointRange& r) { return v < r.first; });
      return at != begin && c <= (at - 1)->last;
    };
    if (in(std::begin(kLetterRanges), std::end(kLetterRanges))) return kLetter;
    if (in(std::begin(kNumberRanges), std::end(kNumberRanges))) return kNumber;
    if (in(std::begin(kWhiteSpaceRanges), std::end(kWhiteSpaceRanges))) return kSpace;
    return kOther;
  }

  /// The pieces of @p text: each maximal valid UTF-8 stretch cut by the pattern, each invalid byte alone.
  std::vector<std::string> pieces(std::string_view text) const {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < text.size()) {
      std::vector<uint32_t> code_points;
      std::vector<size_t> offsets;  // byte offset of each code point, and the stretch's end
      size_t length = 0;
      uint32_t c = 0;
      while (i < text.size() && (length = decode(text, i, c)) > 0) {
        offsets.push_back(i);
        code_points.push_back(c);
        i += length;
      }
      offsets.push_back(i);
      for (size_t at = 0; at < code_points.size();) {
        const size_t n = match(code_points, at);
        out.emplace_back(text.substr(offsets[at], offsets[at + n] - offsets[at]));
        at += n;
      }
      if (i < text.size()) out.emplace_back(text.substr(i++, 1));  // an invalid byte
    }
    return out;
  }

  /// The ids of @p text, as tiktoken's encode_ordinary gives them for valid UTF-8.
  std::vector<int32_t> encode(std::string_view text) const {
    std::vector<int32_t> ids;
    for (const std::string& piece : pieces(text)) {
      if (const auto whole = ranks_.find(piece); whole != ranks_.end()) {
        ids.push_back(whole->second);
        continue;
      }
      for (const std::string& part : byte_pair_merge(piece)) ids.push_back(ranks_.at(part));
    }
    return ids;
  }

 private:
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

  // The length in bytes of the valid UTF-8 character at text[i] (its code point into c), or 0.
  static size_t decode(std::string_view text, size_t i, uint32_t& c) {
    const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
    const uint8_t b = byte(0);
    size_t n = b < 0x80                   ? 1
               : (b >= 0xC2 && b <= 0xDF) ? 2
               : (b >= 0xE0 && b <= 0xEF) ? 3
               : (b >= 0xF0 && b <= 0xF4) ? 4
                                          : 0;
    if (n == 0 || i + n > text.size()) return 0;
    c = n == 1 ? b : b & (0xFF >> (n + 1));
    for (size_t k = 1; k < n; ++k) {
      if ((byte(k) & 0xC0) != 0x80) return 0;
      c = (c << 6) | (byte(k) & 0x3F);
    }
    const uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < smallest[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;  // overlong, too big, surrogate
    return n;
  }

  // How many code points GPT-2's pattern matches at @p at: the alternatives in order, the first that matches.
  static size_t match(const std::vector<uint32_t>& s, size_t at) {
    const size_t n = s.size();
    const auto cls = [&](size_t k) { return class_of(s[k]); };
    // '(?:[sdmt]|ll|ve|re)
    if (s[at] == '\'') {
      if (at + 1 < n && (s[at + 1] == 's' || s[at + 1] == 'd' || s[at + 1] == 'm' || s[at + 1] == 't')) return 2;
      if (at + 2 < n) {
        const uint32_t a = s[at + 1], b = s[at + 2];
        if ((a == 'l' && b == 'l') || (a == 'v' && b == 'e') || (a == 'r' && b == 'e')) return 3;
      }
    }
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': the optional space taken if the rest then matches
    for (const Class wanted : {kLetter, kNumber, kOther}) {
      for (const size_t space : {size_t{1}, size_t{0}}) {
        if (space == 1 && s[at] != ' ') continue;
        size_t end = at + space;
        while (end < n && cls(end) == wanted) ++end;
        if (end > at + space) return end - at;
      }
    }
    // \s+(?!\S): the longest run of white space not followed by a non-space, backtracking one at a time
    size_t run = 0;
    while (at + run < n && cls(at + run) == kSpace) ++run;
    for (size_t length = run; length >= 1; --length)
      if (at + length == n || cls(at + length) == kSpace) return length;
    // \s+
    if (run > 0) return run;
    return 1;  // unreachable: every character is a letter, a number, a space or another
  }

  uint32_t rank(const std::string& bytes) const {
    const auto found = ranks_.find(bytes);
    return found == ranks_.end() ? kNone : static_cast<uint32_t>(found->second);
  }

  // tiktoken's rule: while some adjacent pair joined is a token, join the leftmost of lowest rank.
  std::vector<std::string> byte_pair_merge(const std::string& piece) const {
    std::vector<std::string> parts;
    for (const char c : piece) parts.emplace_back(1, c);
    while (parts.size() > 1) {
      uint32_t best = kNone;
      size_t at = 0;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        const uint32_t r = rank(parts[i] + parts[i + 1]);
        if (r < best) best = r, at = i;
      }
      if (best == kNone) break;
      parts[at] += parts[at + 1];
      parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    }
    return parts;
  }

  std::unordered_map<std::string, int32_t> ranks_;
};

}  // namespace speedlabs::testing
