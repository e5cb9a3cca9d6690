/// @file gpt2_word_cache.h
/// @brief The word cache of one GPT2Tokenizer::encode() call (internal to datasets/).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <vector>

#include "datasets/bytes_map.h"
#include "datasets/gpt2_tables.h"

namespace datasets::gpt2_internal {

// Open addressing over keys of up to 8 bytes (16-byte slots) or up to 16 (24-byte slots): a piece's ids,
// one inline, more as a range of the word cache's id store.

template <bool kWide>
class ShortSlots {
 public:
  struct Probe {
    size_t slot;  // where the key is, or the empty slot where it would go
    bool hit;
  };
  Probe probe(const ShortKey& key, uint64_t h) const {
    if (slots_.empty()) return {0, false};
    for (size_t slot = h & mask_;; slot = (slot + 1) & mask_) {
      const Slot& s = slots_[slot];
      if (s.meta == 0) return {slot, false};
      if ((s.meta & 0xFF) == key.size && s.w0 == key.w0 && (!kWide || s.wide_w1() == key.w1)) return {slot, true};
    }
  }
  uint32_t meta(size_t slot) const { return slots_[slot].meta; }
  uint32_t value(size_t slot) const { return slots_[slot].value; }
  size_t size() const { return entries_; }
  // Stores @p meta and @p value for @p key, whose probe() gave @p slot.
  void insert(const ShortKey& key, uint64_t h, size_t slot, uint32_t meta, uint32_t value) {
    if (slots_.empty() || (entries_ + 1) * 2 > slots_.size()) {
      grow();
      slot = probe(key, h).slot;
    }
    Slot& s = slots_[slot];
    s.w0 = key.w0;
    s.set_w1(key.w1);
    s.meta = meta;
    s.value = value;
    ++entries_;
  }

 private:
  struct NarrowSlot {
    uint64_t w0;
    uint32_t meta;   // 0: empty; else the key's size | the number of ids << 8
    uint32_t value;  // the id when there is one, else where the ids begin in the id store
    uint64_t wide_w1() const { return 0; }
    void set_w1(uint64_t) {}
  };
  struct WideSlot {
    uint64_t w0, w1;
    uint32_t meta, value;
    uint64_t wide_w1() const { return w1; }
    void set_w1(uint64_t v) { w1 = v; }
  };
  using Slot = std::conditional_t<kWide, WideSlot, NarrowSlot>;

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.meta == 0) continue;
      size_t slot = TokenTable::hash({s.w0, s.wide_w1(), s.meta & 0xFF}) & mask_;
      while (slots_[slot].meta != 0) slot = (slot + 1) & mask_;
      slots_[slot] = s;
    }
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t entries_ = 0;
};

// The word cache of one encode() call: the ids of each distinct piece met so far. Pieces of 2..16 bytes
// (nearly all words) are keyed inline, so a hit is one hashed probe into one slot, those up to 8 bytes in
// 16-byte slots (the hot ones stay in the core's caches); longer pieces (up to 64 bytes) in a BytesMap keyed
// by views into the text. Bounded: past kMaxEntries new pieces are merged and not remembered.
class WordCache {
 public:
  static constexpr size_t kMaxShort = 16;
  static constexpr size_t kMaxLong = 64;
  static constexpr size_t kMaxEntries = size_t{1} << 17;

  // Appends the ids of @p key when it is cached; else returns false and remembers where it would go.
  template <bool kWide>
  bool find(const ShortKey& key, uint64_t h, std::vector<int32_t>& out, size_t& slot) const {
    const ShortSlots<kWide>& table = slots<kWide>();
    const auto probe = table.probe(key, h);
    slot = probe.slot;
    if (!probe.hit) return false;
    const uint32_t count = table.meta(slot) >> 8, value = table.value(slot);
    if (count == 1) {
      out.push_back(static_cast<int32_t>(value));
    } else {
      out.insert(out.end(), ids_.begin() + value, ids_.begin() + value + count);
    }
    return true;
  }
  // Remembers @p ids for @p key, whose find() gave @p slot.
  template <bool kWide>
  void insert(const ShortKey& key, uint64_t h, size_t slot, const int32_t* ids, size_t count) {
    if (entries() >= kMaxEntries) return;
    const uint32_t value = count == 1 ? static_cast<uint32_t>(ids[0]) : store(ids, count);
    slots<kWide>().insert(key, h, slot, key.size | static_cast<uint32_t>(count << 8), value);
  }

  const int32_t* find_long(std::string_view piece, size_t& count) const {
    const Range* found = long_.find(piece);
    if (found == nullptr) return nullptr;
    count = found->count;
    return ids_.data() + found->begin;
  }
  void insert_long(std::string_view piece, const int32_t* ids, size_t count) {
    if (entries() >= kMaxEntries) return;
    long_.insert(piece, {store(ids, count), static_cast<uint32_t>(count)});
    ++long_entries_;
  }

 private:
  struct Range {
    uint32_t begin, count;
  };
  template <bool kWide>
  const ShortSlots<kWide>& slots() const {
    if constexpr (kWide) {
      return wide_;
    } else {
      return narrow_;
    }
  }
  template <bool kWide>
  ShortSlots<kWide>& slots() {
    if constexpr (kWide) {
      return wide_;
    } else {
      return narrow_;
    }
  }
  size_t entries() const { return narrow_.size() + wide_.size() + long_entries_; }
  uint32_t store(const int32_t* ids, size_t count) {
    const auto begin = static_cast<uint32_t>(ids_.size());
    ids_.insert(ids_.end(), ids, ids + count);
    return begin;
  }
  ShortSlots<false> narrow_;  // keys of 2..8 bytes
  ShortSlots<true> wide_;     // keys of 9..16 bytes
  BytesMap<Range> long_{64};
  size_t long_entries_ = 0;
  std::vector<int32_t> ids_;  // the ids of pieces of more than one token
};

}  // namespace datasets::gpt2_internal
