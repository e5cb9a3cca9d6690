/// @file bytes_map.h
/// @brief The tokenizer's hash map from byte strings to values (internal to datasets/).
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace datasets {

/// An open-addressing hash map from byte strings (views that outlive the map) to values: the hot
/// lookups of encode() spend their time here, and std::unordered_map's chained nodes miss the cache.
template <typename Value>
class BytesMap {
 public:
  /// An empty map with room for about @p expected entries before it grows.
  /// @param expected  entries the caller expects to insert
  explicit BytesMap(size_t expected = 64) { rehash(expected * 2); }

  /// The value stored for @p key, or nullptr when it is not there.
  /// @param key  the bytes to look up
  const Value* find(std::string_view key) const {
    const uint64_t h = hash(key);
    for (size_t slot = h & mask_;; slot = (slot + 1) & mask_) {
      const uint32_t index = slots_[slot];
      if (index == 0) return nullptr;
      const Entry& entry = entries_[index - 1];
      if (entry.hash == h && same_bytes(entry.key, key)) return &entry.value;
    }
  }

  /// Adds @p key (which must not be present yet).
  void insert(std::string_view key, Value value) {
    if ((entries_.size() + 1) * 2 > slots_.size()) rehash(slots_.size() * 2);
    entries_.push_back({key, hash(key), value});
    place(entries_.size() - 1);
  }

 private:
  struct Entry {
    std::string_view key;
    uint64_t hash;
    Value value;
  };

  // Keys are short (a word): comparing 8 bytes at a time inline beats a call to memcmp.
  static bool same_bytes(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    size_t i = 0;
    for (; i + 8 <= a.size(); i += 8) {
      uint64_t x, y;
      std::memcpy(&x, a.data() + i, 8);
      std::memcpy(&y, b.data() + i, 8);
      if (x != y) return false;
    }
    for (; i < a.size(); ++i)
      if (a[i] != b[i]) return false;
    return true;
  }

  static uint64_t hash(std::string_view key) {
    uint64_t h = key.size() * 0x9E3779B97F4A7C15ull;
    size_t i = 0;
    for (; i + 8 <= key.size(); i += 8) {
      uint64_t chunk;
      std::memcpy(&chunk, key.data() + i, 8);
      h = (h ^ chunk) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
    }
    uint64_t tail = 0;
    std::memcpy(&tail, key.data() + i, key.size() - i);
    h = (h ^ tail) * 0x94D049BB133111EBull;
    return h ^ (h >> 29);
  }

  void place(size_t index) {
    size_t slot = entries_[index].hash & mask_;
    while (slots_[slot] != 0) slot = (slot + 1) & mask_;
    slots_[slot] = static_cast<uint32_t>(index + 1);
  }

  void rehash(size_t at_least) {
    size_t size = 16;
    while (size < at_least) size *= 2;
    slots_.assign(size, 0);
    mask_ = size - 1;
    for (size_t i = 0; i < entries_.size(); ++i) place(i);
  }

  std::vector<Entry> entries_;
  std::vector<uint32_t> slots_;  // entry index + 1, 0 = empty
  size_t mask_ = 0;
};

}  // namespace datasets
