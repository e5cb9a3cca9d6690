// BPE's merges (gpt2_merge.h): a rescan of all pairs for short pieces; for long ones, cuts where no merge can
// join and a bucket queue that makes the same merges in the same order in time proportional to the length.
#include "datasets/gpt2_merge.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "datasets/gpt2_tokenizer.h"

namespace datasets::gpt2_internal {

namespace {

// BPE merges the lowest-ranked adjacent pair, leftmost first, until none is a token. Rescanning all pairs after
// each merge (merge_short) is quadratic in the piece's length; here the same merges
// in the same order come from a bucket queue. Each rank present has a bucket of the positions whose pair has that rank;
// buckets are taken lowest rank first and their positions in increasing order (what "leftmost first" asks). A merge
// only changes the pairs on its two sides, and both contain the token just made, so neither can have the rank being
// processed (a longer byte string is another token): the current bucket never grows while it is worked through. When a
// merge makes a pair of a lower rank (" " + "the" is ranked before "the"), the bucket is put back and the lower one is
// taken first. Stale entries (a part merged away, or its pair changed) are skipped. Positions mostly arrive in
// increasing order (merges run left to right), so a bucket is a sorted vector read with a cursor; a position that
// arrives out of order goes to a small heap beside it. A run of one character therefore costs a constant per byte; the
// worst case is n log n.
template <typename Index>
class BucketMerge {
 public:
  BucketMerge() : bucket_of_rank_(GPT2Tokenizer::kVocabSize, -1) {}

  // Appends the merged ids of @p piece (n >= 2 bytes). @p byte_pair: two bytes -> their token or 0xFFFF.
  void run(const uint8_t* piece, size_t n, const std::array<uint32_t, 256>& byte_token, const uint16_t* byte_pair,
           const PairTable& pairs, std::vector<int32_t>& out) {
    id_.resize(n);
    pair_.resize(n);
    next_.resize(n);
    previous_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      id_[i] = static_cast<uint16_t>(byte_token[piece[i]]);
      next_[i] = static_cast<Index>(i + 1);
      previous_[i] = static_cast<Index>(i - 1);  // previous_[0] is never read
    }
    for (size_t i = 0; i + 1 < n; ++i) {
      const uint16_t merged = byte_pair[(size_t{piece[i]} << 8) | piece[i + 1]];
      set_pair(static_cast<Index>(i), merged == kNone ? kNoRank : merged);
    }
    pair_[n - 1] = kNone;
    while (!queue_.empty()) {
      std::pop_heap(queue_.begin(), queue_.end(), std::greater<>());
      const uint32_t rank = queue_.back();
      queue_.pop_back();
      // By index, not by reference: set_pair() may add buckets, which moves them.
      const auto current = static_cast<size_t>(bucket_of_rank_[rank]);
      buckets_[current].queued = false;
      Index at = 0;
      while (buckets_[current].take(at)) {
        if (id_[at] == kGone || pair_[at] != rank) continue;  // stale
        const Index right = next_[at];
        const Index after = next_[right];
        id_[at] = static_cast<uint16_t>(rank);
        id_[right] = kGone;
        next_[at] = after;
        bool lower = false;
        if (after < n) {
          previous_[after] = at;
          const uint32_t r = pairs.find(rank, id_[after]);
          lower |= r < rank;
          set_pair(at, r);
        } else {
          pair_[at] = kNone;
        }
        if (at > 0) {
          const Index before = previous_[at];
          const uint32_t r = pairs.find(id_[before], rank);
          lower |= r < rank;
          set_pair(before, r);
        }
        if (lower) {  // a lower rank first: this bucket goes back to the queue
          if (!buckets_[current].empty()) enqueue(rank, buckets_[current]);
          break;
        }
      }
    }
    for (size_t i = 0; i < n; i = next_[i]) out.push_back(static_cast<int32_t>(id_[i]));
    for (const uint32_t rank : used_ranks_) {
      buckets_[static_cast<size_t>(bucket_of_rank_[rank])].clear();
      bucket_of_rank_[rank] = -1;
    }
    used_ranks_.clear();
  }

  // Gives the memory of the arrays and buckets back.
  void release() {
    id_ = {};
    pair_ = {};
    next_ = {};
    previous_ = {};
    buckets_ = {};
  }

 private:
  // Ids and ranks are below 50,257, so they fit 16 bits (less memory to sweep on a long piece).
  static constexpr uint16_t kNone = 0xFFFF;  // pair_: not a token
  static constexpr uint16_t kGone = 0xFFFE;  // id_: a part merged into its left neighbour

  struct Bucket {
    std::vector<Index> sorted;  // positions, non-decreasing from `cursor` on
    size_t cursor = 0;
    std::vector<Index> late;  // a min-heap of the positions that came out of order
    bool queued = false;

    bool empty() const { return cursor == sorted.size() && late.empty(); }
    void add(Index at) {
      if (cursor == sorted.size()) {
        sorted.clear();
        cursor = 0;
      }
      if (sorted.size() == cursor || at >= sorted.back()) {
        sorted.push_back(at);
      } else {
        late.push_back(at);
        std::push_heap(late.begin(), late.end(), std::greater<>());
      }
    }
    bool take(Index& at) {  // the lowest position left
      const bool has_sorted = cursor < sorted.size();
      if (!late.empty() && (!has_sorted || late.front() < sorted[cursor])) {
        std::pop_heap(late.begin(), late.end(), std::greater<>());
        at = late.back();
        late.pop_back();
        return true;
      }
      if (!has_sorted) return false;
      at = sorted[cursor++];
      return true;
    }
    void clear() {
      sorted.clear();
      late.clear();
      cursor = 0;
      queued = false;
    }
  };

  void enqueue(uint32_t rank, Bucket& bucket) {
    bucket.queued = true;
    queue_.push_back(rank);
    std::push_heap(queue_.begin(), queue_.end(), std::greater<>());
  }

  // The pair at @p at now has rank @p rank (kNoRank: no token).
  inline void set_pair(Index at, uint32_t rank) {
    if (rank == kNoRank) {
      pair_[at] = kNone;
      return;
    }
    pair_[at] = static_cast<uint16_t>(rank);
    int32_t index = bucket_of_rank_[rank];
    if (index < 0) index = new_bucket(rank);
    Bucket& bucket = buckets_[static_cast<size_t>(index)];
    bucket.add(at);
    if (!bucket.queued) enqueue(rank, bucket);
  }

  // The first position of @p rank in this piece: a bucket for it (kept from an earlier piece when there is one).
  __attribute__((noinline)) int32_t new_bucket(uint32_t rank) {
    const auto index = static_cast<int32_t>(used_ranks_.size());
    bucket_of_rank_[rank] = index;
    used_ranks_.push_back(rank);
    if (buckets_.size() < used_ranks_.size()) buckets_.emplace_back();
    return index;
  }

  std::vector<uint16_t> id_;    // the token of the part starting here (kGone: merged away)
  std::vector<uint16_t> pair_;  // the rank of this part joined with the next (kNone: not a token)
  std::vector<Index> next_, previous_;
  std::vector<int32_t> bucket_of_rank_;  // rank -> index into buckets_, -1 when not in use
  std::vector<uint32_t> used_ranks_;     // the ranks with a bucket, in the order they got it
  std::vector<Bucket> buckets_;          // kept between pieces for their memory
  std::vector<uint32_t> queue_;          // min-heap of the ranks whose bucket is queued
};

}  // namespace

void MergeTables::merge_short(const uint8_t* piece, size_t n, std::vector<int32_t>& out) const {
  uint32_t ids[kShortMerge];
  uint32_t ranks[kShortMerge];  // ranks[i]: parts i and i + 1 joined
  for (size_t i = 0; i < n; ++i) ids[i] = byte_token[piece[i]];
  for (size_t i = 0; i + 1 < n; ++i) ranks[i] = first_round(piece[i], piece[i + 1]);
  size_t count = n;
  while (count > 1) {
    uint32_t best = kNoRank;
    size_t at = 0;
    for (size_t i = 0; i + 1 < count; ++i)
      if (ranks[i] < best) best = ranks[i], at = i;
    if (best == kNoRank) break;
    ids[at] = best;
    for (size_t i = at + 1; i + 1 < count; ++i) ids[i] = ids[i + 1], ranks[i] = ranks[i + 1];
    --count;
    ranks[at] = at + 1 < count ? pairs.find(ids[at], ids[at + 1]) : kNoRank;
    if (at > 0) ranks[at - 1] = pairs.find(ids[at - 1], ids[at]);
  }
  for (size_t i = 0; i < count; ++i) out.push_back(static_cast<int32_t>(ids[i]));
}

// BPE proper: appends the ids merging gives @p piece (n >= 2 bytes). Merges never cross two adjacent
// bytes that no token contains side by side (a "cut": a part across it would be such a token), so a long
// piece is merged cut by cut: a megabyte of spaces or of emoji becomes a megabyte of tiny merges.
void MergeTables::merge(const uint8_t* piece, size_t n, std::vector<int32_t>& out) const {
  if (n <= kShortMerge) return merge_short(piece, n, out);
  size_t start = 0;
  for (size_t i = 0; i + 1 < n; ++i) {
    if (joinable[(size_t{piece[i]} << 8) | piece[i + 1]]) continue;
    merge_segment(piece + start, i + 1 - start, out);
    start = i + 1;
  }
  merge_segment(piece + start, n - start, out);
}

void MergeTables::merge_segment(const uint8_t* segment, size_t n, std::vector<int32_t>& out) const {
  if (n == 1) {
    out.push_back(static_cast<int32_t>(byte_token[*segment]));
  } else if (n <= kShortMerge) {
    merge_short(segment, n, out);
  } else if (n < std::numeric_limits<uint32_t>::max() - 1) {
    // Kept by the thread between calls: a fresh megabyte of arrays each call cost more in page faults than
    // the merging itself. What a segment of more than kKeptMerge bytes needed is given back at once.
    thread_local BucketMerge<uint32_t> kept;
    kept.run(segment, n, byte_token, byte_pair.data(), pairs, out);
    if (n > kKeptMerge) kept.release();
  } else {
    BucketMerge<uint64_t>().run(segment, n, byte_token, byte_pair.data(), pairs, out);  // 4 GiB or more
  }
}

}  // namespace datasets::gpt2_internal
