/// @file gpt2_pretokenizer.h
/// @brief GPT-2's pre-tokenization pattern as a hand-written scanner, with tiktoken's Unicode classes
/// (internal to datasets/: GPT2Tokenizer::pretokenize() is the public face).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace datasets::gpt2_internal {

/// What GPT-2's pattern needs to know of a character: letter (\\p{L}), number (\\p{N}), white space (\\s),
/// anything else; kInvalid marks a byte that does not begin a valid UTF-8 character.
enum CharClass : uint8_t { kLetter, kNumber, kSpace, kOther, kInvalid };

/// The class of every code point, as tiktoken's regex engine has it (gpt2_unicode_classes.inc): blocks of 256
/// code points, identical blocks stored once (133 of the 4,352 differ), so a lookup is two loads from 43 KB;
/// ASCII has a table of its own.
class ClassTable {
 public:
  ClassTable();
  CharClass ascii(uint8_t byte) const { return static_cast<CharClass>(ascii_[byte]); }
  CharClass operator()(uint32_t code_point) const {
    return static_cast<CharClass>(blocks_[(size_t{index_[code_point >> 8]} << 8) | (code_point & 0xFF)]);
  }

 private:
  std::array<uint8_t, 128> ascii_{};
  std::vector<uint16_t> index_;  // block -> its copy in blocks_
  std::vector<uint8_t> blocks_;
};

/// The one ClassTable, built on first use.
const ClassTable& char_classes();

/// The code point at @p p (p < end) and its length, or 0 when p does not begin a valid UTF-8 character
/// (Unicode Table 3-7: no overlongs, no surrogates, nothing above U+10FFFF; cut short counts as invalid).
inline size_t decode_utf8(const uint8_t* p, const uint8_t* end, uint32_t& code_point) {
  const uint8_t c = p[0];
  const size_t left = static_cast<size_t>(end - p);
  if (c < 0x80) {
    code_point = c;
    return 1;
  }
  if (c >= 0xC2 && c <= 0xDF) {
    if (left < 2 || (p[1] & 0xC0) != 0x80) return 0;
    code_point = ((c & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    return 2;
  }
  if (c >= 0xE0 && c <= 0xEF) {
    const uint8_t low = c == 0xE0 ? 0xA0 : 0x80, high = c == 0xED ? 0x9F : 0xBF;
    if (left < 3 || p[1] < low || p[1] > high || (p[2] & 0xC0) != 0x80) return 0;
    code_point = ((c & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const uint8_t low = c == 0xF0 ? 0x90 : 0x80, high = c == 0xF4 ? 0x8F : 0xBF;
    if (left < 4 || p[1] < low || p[1] > high || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
    code_point = ((c & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
    return 4;
  }
  return 0;
}

/// GPT-2's pattern, alternative by alternative, as a backtracking engine (tiktoken's fancy-regex) runs it at
/// each position: the first alternative that matches wins, each + is greedy.
///   '(?:[sdmt]|ll|ve|re)   a contraction, lower case only
///   ' ?\\p{L}+', ' ?\\p{N}+', ' ?[^\\s\\p{L}\\p{N}]+'   a run of one class, with the one space (U+0020 only) before it
///   \\s+(?!\\S)              white space not followed by a non-space: at the end of the text the whole run;
///                          before a non-space the run less its last character (which starts the next piece)
///   \\s+                    otherwise (a single white-space character before a non-space)
/// An invalid UTF-8 byte is a piece of its own and ends the text for what stands before it, as if each
/// maximal valid stretch were encoded alone.
class Scanner {
 public:
  Scanner(std::string_view text, const ClassTable& classes)
      : p_(reinterpret_cast<const uint8_t*>(text.data())), end_(p_ + text.size()), classes_(classes) {}

  /// Calls on_piece(begin, length) for each piece, in order.
  template <typename OnPiece>
  void run(OnPiece&& on_piece) {
    while (p_ < end_) {
      const uint8_t* const start = p_;
      const size_t contraction = contraction_at(start);
      p_ = contraction > 0 ? start + contraction : piece_end(start);
      on_piece(start, static_cast<size_t>(p_ - start));
    }
  }

 private:
  // The length of the contraction at @p p ('s 't 'm 'd 're 've 'll), or 0.
  size_t contraction_at(const uint8_t* p) const {
    if (*p != '\'' || end_ - p < 2) return 0;
    const uint8_t b1 = p[1];
    if (b1 == 's' || b1 == 't' || b1 == 'm' || b1 == 'd') return 2;
    if (end_ - p < 3) return 0;
    const uint8_t b2 = p[2];
    return (b1 == 'r' && b2 == 'e') || (b1 == 'v' && b2 == 'e') || (b1 == 'l' && b2 == 'l') ? 3 : 0;
  }

  // The class of the character at @p q (q < end) and its length in bytes.
  CharClass class_at(const uint8_t* q, size_t& length) const {
    if (*q < 0x80) {
      length = 1;
      return classes_.ascii(*q);
    }
    uint32_t code_point = 0;
    length = decode_utf8(q, end_, code_point);
    if (length == 0) {
      length = 1;
      return kInvalid;
    }
    return classes_(code_point);
  }

  // Where the piece that starts at @p p (no contraction) ends.
  const uint8_t* piece_end(const uint8_t* p) const {
    size_t length = 0;
    const CharClass cls = class_at(p, length);
    if (cls == kInvalid) return p + 1;
    if (cls != kSpace) return run_end(p + length, cls);
    size_t next_length = 0;
    CharClass next = kInvalid;
    if (*p == ' ' && p + 1 < end_ && (next = class_at(p + 1, next_length)) != kSpace && next != kInvalid)
      return run_end(p + 1 + next_length, next);  // " word", " 42", " !?"
    const uint8_t* last = p;                      // where the run's last character begins
    const uint8_t* q = p + length;
    while (q < end_ && (next = class_at(q, next_length)) == kSpace) {
      last = q;
      q += next_length;
    }
    // Before a non-space (an invalid byte counts as the end): leave the last character to the next piece.
    return q < end_ && next != kInvalid && last > p ? last : q;
  }

  // The end of the run of @p cls from @p q on.
  const uint8_t* run_end(const uint8_t* q, CharClass cls) const {
    while (q < end_) {
#if defined(__SSE2__)
      // 16 bytes at a time while they are ASCII letters (or digits): one compare and a count of trailing
      // ones, where a loop would mispredict its exit at the end of every word.
      if (cls == kLetter || cls == kNumber) {
        q = ascii_run_end(q, cls);
        if (q == end_) break;
      }
#endif
      if (*q < 0x80) {
        if (classes_.ascii(*q) != cls) break;
        ++q;
      } else {
        size_t length = 0;
        if (class_at(q, length) != cls) break;
        q += length;
      }
    }
    return q;
  }

#if defined(__SSE2__)
  // Past the ASCII letters (kLetter) or digits (kNumber) from @p q on, 16 bytes at a time while 16 are left.
  const uint8_t* ascii_run_end(const uint8_t* q, CharClass cls) const {
    while (end_ - q >= 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
      const __m128i t = cls == kLetter ? _mm_sub_epi8(_mm_or_si128(v, _mm_set1_epi8(0x20)), _mm_set1_epi8('a'))
                                       : _mm_sub_epi8(v, _mm_set1_epi8('0'));
      const __m128i limit = _mm_set1_epi8(cls == kLetter ? 25 : 9);  // t <= limit, unsigned: in the class
      const auto in_class = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(t, limit), t)));
      if (in_class != 0xFFFF) return q + __builtin_ctz(~in_class);
      q += 16;
    }
    return q;
  }
#endif

  const uint8_t* p_;
  const uint8_t* const end_;
  const ClassTable& classes_;
};

/// Calls on_piece(begin, length) for each piece of @p text, in order.
template <typename OnPiece>
inline void scan_pieces(std::string_view text, const ClassTable& classes, OnPiece&& on_piece) {
  Scanner(text, classes).run(on_piece);
}

}  // namespace datasets::gpt2_internal
