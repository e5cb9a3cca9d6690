/// @file gpt2_tables.h
/// @brief The GPT-2 tokenizer's lookup tables (internal to datasets/): pieces of up to 16 bytes as two-word keys,
/// the tokens of up to 16 bytes by key, and the token two tokens make together.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace datasets::gpt2_internal {

/// No token: what a lookup gives for bytes that are not one (ranks and ids are below 50,257).
constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();

// Up to 16 bytes of a piece as two words, zero-padded: the word cache's keys.
struct ShortKey {
  uint64_t w0 = 0, w1 = 0;
  uint32_t size = 0;
};

inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The key of [p, p + size), 2 <= size <= 16: overlapping loads that stay within the piece, so it never reads
// past the text, whatever follows it.
inline ShortKey short_key(const uint8_t* p, size_t size) {
  ShortKey key;
  key.size = static_cast<uint32_t>(size);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (size >= 8) {
    key.w0 = load64(p);
    key.w1 = size == 8 ? 0 : load64(p + size - 8) >> (8 * (16 - size));  // bytes 8.. at the bottom
  } else if (size >= 4) {
    key.w0 = load32(p) | (uint64_t{load32(p + size - 4)} << (8 * (size - 4)));  // the overlap ORs equal bytes
  } else {
    key.w0 = p[0] | (uint64_t{p[1]} << 8) | (size == 3 ? uint64_t{p[2]} << 16 : 0);
  }
#else
  uint8_t bytes[16] = {};
  std::memcpy(bytes, p, size);
  std::memcpy(&key.w0, bytes, 8);
  std::memcpy(&key.w1, bytes + 8, 8);
#endif
  return key;
}

// The tokens of up to 16 bytes (all but 72 of GPT-2's), keys stored in the slots: whether a piece is a
// token costs one probe into one 24-byte slot, where BytesMap would chase a key's pointer.
class TokenTable {
 public:
  void reserve(size_t tokens) {
    size_t size = 16;
    while (size < tokens * 2) size *= 2;
    slots_.assign(size, Slot{0, 0, 0, 0});
    mask_ = size - 1;
  }
  void insert(const ShortKey& key, uint32_t id) {
    size_t slot = hash(key) & mask_;
    while (slots_[slot].size != 0) slot = (slot + 1) & mask_;
    slots_[slot] = {key.w0, key.w1, key.size, id};
  }
  uint32_t find(const ShortKey& key) const {
    for (size_t slot = hash(key) & mask_;; slot = (slot + 1) & mask_) {
      const Slot& s = slots_[slot];
      if (s.size == key.size && s.w0 == key.w0 && s.w1 == key.w1) return s.id;
      if (s.size == 0) return kNoRank;
    }
  }
  static uint64_t hash(const ShortKey& key) {
    const uint64_t h = (key.w0 ^ (key.w1 * 0x9E3779B97F4A7C15ull) ^ key.size) * 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 31);
  }

 private:
  struct Slot {
    uint64_t w0, w1;
    uint32_t size;  // 0: empty
    uint32_t id;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// Every pair of tokens (a, b) whose bytes concatenated are a token t, packed a << 16 | b -> t. tiktoken
// merges parts by looking up the bytes of two adjacent parts joined; every part is a token, so the same
// question is this table's, asked with two ids instead of hashing bytes. (GPT-2's files list one pair per
// token; this table has every split of every token into two tokens: 108,299 pairs.)
class PairTable {
 public:
  void reserve(size_t pairs) {
    size_t size = 16;
    while (size * 3 < pairs * 4) size *= 2;  // filled to at most 3/4: 4-byte keys, 16 to a cache line
    keys_.assign(size, kEmptyKey);
    merged_.assign(size, 0);
    shift_ = 64;
    for (size_t s = size; s > 1; s >>= 1) --shift_;
  }
  void insert(uint32_t a, uint32_t b, uint32_t merged) {
    const uint32_t key = (a << 16) | b;
    size_t slot = home(key);
    while (keys_[slot] != kEmptyKey) {
      if (keys_[slot] == key) return;  // the same bytes, so the same token
      slot = (slot + 1) & (keys_.size() - 1);
    }
    keys_[slot] = key;
    merged_[slot] = static_cast<uint16_t>(merged);
  }
  // The token a and b make together, or kNoRank.
  uint32_t find(uint32_t a, uint32_t b) const {
    const uint32_t key = (a << 16) | b;
    for (size_t slot = home(key);; slot = (slot + 1) & (keys_.size() - 1)) {
      const uint32_t k = keys_[slot];
      if (k == key) return merged_[slot];
      if (k == kEmptyKey) return kNoRank;
    }
  }

 private:
  static constexpr uint32_t kEmptyKey = 0xFFFFFFFF;  // ids are below 65536: no pair packs to this
  size_t home(uint32_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  std::vector<uint32_t> keys_;
  std::vector<uint16_t> merged_;
  int shift_ = 64;
};

}  // namespace datasets::gpt2_internal
