// GPT-2 byte-level BPE, token for token what tiktoken (src/lib.rs) does with the same ranks, without a
// regex engine: a hand-written scanner for GPT-2's pattern (gpt2_pretokenizer.h), a word cache
// (gpt2_word_cache.h), and merges over token ids (gpt2_merge.h). This file loads the vocabulary and runs the
// steps; datasets/README.md ("The tokenizer") explains each and what it costs.
#include "datasets/gpt2_tokenizer.h"

#include <algorithm>
#include <array>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "common/errors.h"
#include "common/files.h"
#include "datasets/bytes_map.h"
#include "datasets/data_files.h"
#include "datasets/gpt2_merge.h"
#include "datasets/gpt2_pretokenizer.h"
#include "datasets/gpt2_tables.h"
#include "datasets/gpt2_word_cache.h"

namespace datasets {

namespace fs = std::filesystem;
using speedlabs::RuntimeFailure;
using speedlabs::UsageError;

namespace {

constexpr std::string_view kEndOfTextText = "<|endoftext|>";
static_assert(GPT2Tokenizer::kVocabSize <= 65536, "a pair of ids is packed into 32 bits");

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes for
// code points 256 onwards. Returns, per byte, its code point; the byte order of `printable first`
// is also the order of the first 256 ranks.
std::array<uint32_t, 256> byte_to_code_point() {
  std::array<uint32_t, 256> code_point{};
  uint32_t next_extra = 256;
  for (uint32_t byte = 0; byte < 256; ++byte) {
    const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
    code_point[byte] = printable ? byte : next_extra++;
  }
  return code_point;
}

// The ranks of single bytes: tiktoken's data_gym loader numbers printable bytes first, then the rest.
std::vector<uint8_t> bytes_in_rank_order(const std::array<uint32_t, 256>& code_point) {
  std::vector<uint8_t> order;
  for (int pass = 0; pass < 2; ++pass)
    for (uint32_t byte = 0; byte < 256; ++byte)
      if ((code_point[byte] == byte) == (pass == 0)) order.push_back(static_cast<uint8_t>(byte));
  return order;
}

// Length of the longest valid UTF-8 prefix of [p, p+n) (Unicode Table 3-7: no overlongs, no
// surrogates, nothing above U+10FFFF).
size_t valid_utf8_prefix(const unsigned char* p, size_t n) {
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      if (c == 0xE0) low = 0xA0;
      if (c == 0xED) high = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      if (c == 0xF0) low = 0x90;
      if (c == 0xF4) high = 0x8F;
    } else {
      return i;
    }
    if (i + length > n || p[i + 1] < low || p[i + 1] > high) return i;
    for (size_t k = 2; k < length; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
    i += length;
  }
  return n;
}

// Code points of a valid UTF-8 string (the keys of encoder.json and the lines of vocab.bpe).
std::vector<uint32_t> code_points(std::string_view text, const std::string& where) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  if (valid_utf8_prefix(p, text.size()) != text.size()) throw RuntimeFailure(where + ": invalid UTF-8");
  std::vector<uint32_t> out;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = p[i];
    const size_t length = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t value = length == 1 ? c : c & (0xFF >> (length + 1));
    for (size_t k = 1; k < length; ++k) value = (value << 6) | (p[i + k] & 0x3F);
    out.push_back(value);
    i += length;
  }
  return out;
}

// GPT-2's files spell each byte as one character (byte_to_code_point); this reads the spelling back.
class ByteAlphabet {
 public:
  ByteAlphabet() : code_point_(byte_to_code_point()) {
    for (uint32_t byte = 0; byte < 256; ++byte) byte_of_code_point_[code_point_[byte]] = static_cast<char>(byte);
  }

  // The bytes a token string of encoder.json or vocab.bpe stands for; @p where names it in errors.
  std::string to_bytes(std::string_view spelled, const std::string& where) const {
    std::string bytes;
    for (const uint32_t c : code_points(spelled, where)) {
      const auto it = byte_of_code_point_.find(c);
      if (it == byte_of_code_point_.end()) throw RuntimeFailure(where + ": a character outside GPT-2's byte alphabet");
      bytes += it->second;
    }
    return bytes;
  }

  const std::array<uint32_t, 256>& code_point() const { return code_point_; }

 private:
  std::array<uint32_t, 256> code_point_;
  std::unordered_map<uint32_t, char> byte_of_code_point_;
};

// The bytes of each rank, as tiktoken's data_gym_to_mergeable_bpe_ranks builds them: bytes, then each merge.
std::vector<std::string> ranks_from_merges(const std::string& merges_text, const std::string& vocab_bpe,
                                           const ByteAlphabet& alphabet) {
  std::vector<std::string> by_rank;
  for (const uint8_t byte : bytes_in_rank_order(alphabet.code_point()))
    by_rank.emplace_back(1, static_cast<char>(byte));
  std::istringstream lines(merges_text);
  std::string line;
  std::getline(lines, line);  // "#version: 0.2"
  if (line.rfind("#version", 0) != 0) throw RuntimeFailure(vocab_bpe + ": the first line is not '#version: ...'");
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
      throw RuntimeFailure(vocab_bpe + ": a merge line is not two tokens: '" + line + "'");
    const std::string where = vocab_bpe + " line " + std::to_string(by_rank.size() - 254);
    by_rank.push_back(alphabet.to_bytes(std::string_view(line).substr(0, space), where) +
                      alphabet.to_bytes(std::string_view(line).substr(space + 1), where));
  }
  if (by_rank.size() != static_cast<size_t>(GPT2Tokenizer::kEndOfText))
    throw RuntimeFailure(vocab_bpe + ": expected 50,000 merges, found " + std::to_string(by_rank.size() - 256));
  return by_rank;
}

// The bytes of each id from encoder.json, which must give every token the id equal to its rank (tiktoken
// asserts the same).
std::vector<std::string> tokens_from_encoder(const std::string& encoder_text, const std::string& encoder_json,
                                             const std::string& vocab_bpe, const std::vector<std::string>& by_rank,
                                             const ByteAlphabet& alphabet) {
  constexpr int32_t kEndOfText = GPT2Tokenizer::kEndOfText;
  constexpr int32_t kVocabSize = GPT2Tokenizer::kVocabSize;
  nlohmann::json encoder;
  try {
    encoder = nlohmann::json::parse(encoder_text);
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeFailure(encoder_json + ": not valid JSON: " + e.what());
  }
  if (!encoder.is_object() || encoder.size() != static_cast<size_t>(kVocabSize))
    throw RuntimeFailure(encoder_json + ": expected an object of 50,257 tokens");
  std::vector<std::string> token_bytes(kVocabSize);
  std::vector<bool> seen(kVocabSize, false);
  for (const auto& [spelled, id_json] : encoder.items()) {
    if (!id_json.is_number_integer())
      throw RuntimeFailure(encoder_json + ": id of '" + spelled + "' is not an integer");
    const int64_t id = id_json.get<int64_t>();
    if (id < 0 || id >= kVocabSize || seen[id])
      throw RuntimeFailure(encoder_json + ": bad or repeated id for '" + spelled + "'");
    seen[id] = true;
    const std::string bytes = id == kEndOfText ? std::string(kEndOfTextText) : alphabet.to_bytes(spelled, encoder_json);
    if (id != kEndOfText && by_rank[id] != bytes)
      throw RuntimeFailure(encoder_json + " and " + vocab_bpe + " disagree about token " + std::to_string(id));
    token_bytes[id] = bytes;
  }
  if (token_bytes[kEndOfText] != kEndOfTextText)
    throw RuntimeFailure(encoder_json + ": token 50256 is not <|endoftext|>");
  return token_bytes;
}

}  // namespace

using namespace gpt2_internal;  // NOLINT(google-build-using-namespace): the tokenizer's parts

struct GPT2Tokenizer::Impl {
  std::vector<std::string> token_bytes;    // id -> bytes
  BytesMap<uint32_t> rank_of{kVocabSize};  // bytes -> rank (== id); keys are views into token_bytes
  TokenTable short_tokens;                 // the tokens of up to 16 bytes, for the whole-piece check
  size_t longest_token = 0;
  MergeTables merging;
  const ClassTable* classes = &char_classes();
  std::string fingerprint;

  // The tables encode() looks things up in, from token_bytes and rank_of.
  void index_vocabulary() {
    for (uint32_t byte = 0; byte < 256; ++byte) {
      const char c = static_cast<char>(byte);
      merging.byte_token[byte] = *rank_of.find(std::string_view(&c, 1));  // ranks_from_merges made all 256
    }
    // Every way to cut each token into two tokens.
    std::vector<std::array<uint32_t, 3>> splits;
    for (int32_t id = 0; id < kEndOfText; ++id) {
      const std::string_view bytes = token_bytes[id];
      for (size_t cut = 1; cut < bytes.size(); ++cut) {
        const uint32_t* left = rank_of.find(bytes.substr(0, cut));
        const uint32_t* right = left ? rank_of.find(bytes.substr(cut)) : nullptr;
        if (right) splits.push_back({*left, *right, static_cast<uint32_t>(id)});
      }
    }
    merging.pairs.reserve(splits.size());
    for (const auto& [left, right, merged] : splits) merging.pairs.insert(left, right, merged);
    for (uint32_t a = 0; a < 256; ++a)
      for (uint32_t b = 0; b < 256; ++b) {
        const uint32_t merged = merging.pairs.find(merging.byte_token[a], merging.byte_token[b]);
        if (merged != kNoRank) merging.byte_pair[(a << 8) | b] = static_cast<uint16_t>(merged);
      }
    for (int32_t id = 0; id < kEndOfText; ++id) {
      const std::string& bytes = token_bytes[id];
      longest_token = std::max(longest_token, bytes.size());
      for (size_t i = 0; i + 1 < bytes.size(); ++i)
        merging.joinable[(size_t{static_cast<uint8_t>(bytes[i])} << 8) | static_cast<uint8_t>(bytes[i + 1])] = 1;
    }
    short_tokens.reserve(kEndOfText);
    for (int32_t id = 0; id < kEndOfText; ++id) {
      const std::string& bytes = token_bytes[id];
      if (bytes.size() <= WordCache::kMaxShort) {
        const auto* begin = reinterpret_cast<const uint8_t*>(bytes.data());
        short_tokens.insert(short_key(begin, bytes.size()), static_cast<uint32_t>(id));
      }
    }
  }

  // What one encode() call keeps: its word cache and the counts (always counted: an increment costs less
  // than asking whether to).
  struct Call {
    bool use_cache = true;
    GPT2Tokenizer::PieceCounts own_counts;
    GPT2Tokenizer::PieceCounts* counts = &own_counts;
    WordCache cache;
  };

  // A piece of two or more bytes, without the cache: one token when it is one (tiktoken asks this first),
  // else merged. @p key: the piece's ShortKey when it has at most 16 bytes.
  void encode_uncached(const uint8_t* piece, size_t n, const ShortKey* key, std::vector<int32_t>& out,
                       Call& call) const {
    uint32_t whole = kNoRank;
    if (key) {
      whole = short_tokens.find(*key);
    } else if (n <= longest_token) {
      const uint32_t* found = rank_of.find({reinterpret_cast<const char*>(piece), n});
      if (found) whole = *found;
    }
    if (whole != kNoRank) {
      out.push_back(static_cast<int32_t>(whole));
      ++call.counts->whole_tokens;
      return;
    }
    ++call.counts->merged, call.counts->merged_bytes += n;
    merging.merge(piece, n, out);
  }

  // A piece of 2..8 (kWide: 9..16) bytes, through the word cache's inline keys.
  template <bool kWide>
  void encode_short(const uint8_t* piece, size_t n, std::vector<int32_t>& out, Call& call) const {
    const ShortKey key = short_key(piece, n);
    if (!call.use_cache) return encode_uncached(piece, n, &key, out, call);
    const uint64_t h = TokenTable::hash(key);
    size_t slot = 0;
    if (call.cache.find<kWide>(key, h, out, slot)) {
      ++call.counts->cache_hits;
      return;
    }
    const size_t before = out.size();
    encode_uncached(piece, n, &key, out, call);
    call.cache.insert<kWide>(key, h, slot, out.data() + before, out.size() - before);
  }

  // One piece of @p n >= 1 bytes.
  void encode_piece(const uint8_t* piece, size_t n, std::vector<int32_t>& out, Call& call) const {
    ++call.counts->pieces;
    if (n == 1) {
      out.push_back(static_cast<int32_t>(merging.byte_token[*piece]));
      ++call.counts->single_bytes;
      return;
    }
    if (n <= 8) return encode_short<false>(piece, n, out, call);
    if (n <= WordCache::kMaxShort) return encode_short<true>(piece, n, out, call);
    if (!call.use_cache || n > WordCache::kMaxLong) return encode_uncached(piece, n, nullptr, out, call);
    const size_t before = out.size();
    const std::string_view view(reinterpret_cast<const char*>(piece), n);
    size_t count = 0;
    if (const int32_t* ids = call.cache.find_long(view, count)) {
      out.insert(out.end(), ids, ids + count);
      ++call.counts->cache_hits;
      return;
    }
    encode_uncached(piece, n, nullptr, out, call);
    call.cache.insert_long(view, out.data() + before, out.size() - before);
  }

  std::vector<int32_t> encode(std::string_view text) const {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 16);
    Call call;
    scan_pieces(text, *classes, [&](const uint8_t* piece, size_t n) { encode_piece(piece, n, out, call); });
    return out;
  }
};

GPT2Tokenizer::GPT2Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GPT2Tokenizer::GPT2Tokenizer(GPT2Tokenizer&&) noexcept = default;
GPT2Tokenizer& GPT2Tokenizer::operator=(GPT2Tokenizer&&) noexcept = default;
GPT2Tokenizer::~GPT2Tokenizer() = default;

GPT2Tokenizer GPT2Tokenizer::load(const fs::path& data_dir) {
  const fs::path encoder_json = require_file(data_dir, kEncoderJsonPath);  // checked in manifest order
  const fs::path vocab_bpe = require_file(data_dir, kVocabBpePath);
  return from_files(encoder_json, vocab_bpe);
}

GPT2Tokenizer GPT2Tokenizer::from_files(const fs::path& encoder_json, const fs::path& vocab_bpe) {
  const ByteAlphabet alphabet;
  const std::string merges_text = speedlabs::read_file(vocab_bpe);
  const std::vector<std::string> by_rank = ranks_from_merges(merges_text, vocab_bpe.string(), alphabet);
  const std::string encoder_text = speedlabs::read_file(encoder_json);
  auto impl = std::make_unique<Impl>();
  impl->token_bytes = tokens_from_encoder(encoder_text, encoder_json.string(), vocab_bpe.string(), by_rank, alphabet);
  for (int32_t id = 0; id < kEndOfText; ++id) impl->rank_of.insert(impl->token_bytes[id], static_cast<uint32_t>(id));
  impl->index_vocabulary();
  impl->fingerprint = sha256_hex(sha256_hex(encoder_text) + sha256_hex(merges_text));
  return GPT2Tokenizer(std::move(impl));
}

std::vector<int32_t> GPT2Tokenizer::encode(std::string_view text) const { return impl_->encode(text); }

std::vector<int32_t> GPT2Tokenizer::encode_allowing_special(std::string_view text) const {
  std::vector<int32_t> out;
  size_t start = 0;
  while (true) {
    const size_t found = text.find(kEndOfTextText, start);
    const std::vector<int32_t> part =
        impl_->encode(text.substr(start, found == std::string_view::npos ? text.npos : found - start));
    out.insert(out.end(), part.begin(), part.end());
    if (found == std::string_view::npos) return out;
    out.push_back(kEndOfText);
    start = found + kEndOfTextText.size();
  }
}

std::vector<std::string_view> GPT2Tokenizer::pretokenize(std::string_view text) const {
  std::vector<std::string_view> pieces;
  pieces.reserve(text.size() / 4 + 4);
  scan_pieces(text, *impl_->classes,
              [&](const uint8_t* piece, size_t n) { pieces.emplace_back(reinterpret_cast<const char*>(piece), n); });
  return pieces;
}

size_t GPT2Tokenizer::count_pieces(std::string_view text) const {
  size_t count = 0;
  scan_pieces(text, *impl_->classes, [&](const uint8_t*, size_t) { ++count; });
  return count;
}

std::vector<int32_t> GPT2Tokenizer::encode_pieces(const std::vector<std::string_view>& pieces, bool use_cache,
                                                  PieceCounts* counts) const {
  std::vector<int32_t> out;
  Impl::Call call;
  call.use_cache = use_cache;
  if (counts) call.counts = counts;
  if (counts) *counts = {};
  for (const std::string_view piece : pieces) {
    if (piece.empty()) continue;
    const auto* begin = reinterpret_cast<const uint8_t*>(piece.data());
    impl_->encode_piece(begin, piece.size(), out, call);
  }
  return out;
}

const std::string& GPT2Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= kVocabSize)
    throw UsageError("token id " + std::to_string(id) + " is not a GPT-2 token (0 to 50256)");
  return impl_->token_bytes[id];
}

std::string GPT2Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (const int32_t id : ids) out += token_bytes(id);
  return out;
}

const std::string& GPT2Tokenizer::fingerprint() const { return impl_->fingerprint; }

}  // namespace datasets