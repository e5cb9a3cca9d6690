// GPT-2 byte-level BPE, the same algorithm as tiktoken (src/lib.rs: byte_pair_merge) on the same ranks.
#include "datasets/gpt2_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <unordered_map>

#include "common/errors.h"
#include "common/files.h"
#include "datasets/bytes_map.h"
#include "datasets/data_files.h"

namespace datasets {

namespace fs = std::filesystem;

// Outside the anonymous namespace: GPT2Tokenizer::Impl, which has external linkage, holds a pattern through one.
struct CodeDeleter {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};
using speedlabs::RuntimeFailure;
using speedlabs::UsageError;

namespace {

// GPT-2's pre-tokenization pattern as tiktoken writes it for `gpt2`,
//   '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (the original 's|'t|'re|... spelling is the same: no alternative is a prefix of an earlier one),
// with \s spelled out as Unicode's White_Space property, which is what tiktoken's Rust regex means
// by \s. PCRE2's own \s differs: it also matches U+180E (Mongolian vowel separator, no longer a
// space since Unicode 6.3); with it, "\u180e's" would split differently from tiktoken.
#define SPEEDLABS_WHITE_SPACE \
  R"(\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})"
constexpr std::string_view kPattern =
    R"('(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^)" SPEEDLABS_WHITE_SPACE R"(\p{L}\p{N}]+)"
    R"(|[)" SPEEDLABS_WHITE_SPACE R"(]+(?![^)" SPEEDLABS_WHITE_SPACE R"(])|[)" SPEEDLABS_WHITE_SPACE R"(]+)";
#undef SPEEDLABS_WHITE_SPACE
constexpr std::string_view kEndOfTextText = "<|endoftext|>";
constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();
// Pieces longer than this are merged with a heap (n log n), shorter ones by linear scans (faster when short).
constexpr size_t kHeapMergeFrom = 96;
// Pieces up to this length are remembered within one encode() call; text repeats its words a lot.
constexpr size_t kCachedPieceMax = 64;

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

// The ids of the pieces already encoded in one encode() call: a range of `ids`.
struct PieceCache {
  struct Range {
    uint32_t begin, size;
  };
  BytesMap<Range> ranges{4096};
  std::vector<int32_t> ids;
};

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

std::unique_ptr<pcre2_code, CodeDeleter> compile_pattern() {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  std::unique_ptr<pcre2_code, CodeDeleter> pattern(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern.data()),
                                                                 kPattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                                                                 &error_offset, nullptr));
  if (!pattern) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw RuntimeFailure(std::string("PCRE2 could not compile GPT-2's pattern: ") + reinterpret_cast<char*>(message));
  }
  return pattern;
}

}  // namespace

struct GPT2Tokenizer::Impl {
  std::vector<std::string> token_bytes;    // id -> bytes
  BytesMap<uint32_t> rank_of{kVocabSize};  // bytes -> rank (== id); keys are views into token_bytes
  std::unique_ptr<pcre2_code, CodeDeleter> pattern;
  bool jit = false;
  std::string fingerprint;

  uint32_t rank(std::string_view bytes) const {
    const uint32_t* found = rank_of.find(bytes);
    return found ? *found : kNoRank;
  }

  // tiktoken's byte_pair_merge: merge the leftmost adjacent pair whose concatenation has the lowest
  // rank until no adjacent pair is a token. Appends the ids of @p piece to @p out.
  void merge_short(std::string_view piece, std::vector<int32_t>& out) const {
    struct Part {
      size_t start;
      uint32_t rank;  // rank of this part joined with the next one
    };
    // At most kHeapMergeFrom bytes, so the parts fit on the stack (no allocation per piece).
    std::array<Part, kHeapMergeFrom + 1> parts;
    size_t count = 0;
    for (size_t i = 0; i + 1 < piece.size(); ++i) parts[count++] = {i, rank(piece.substr(i, 2))};
    parts[count++] = {piece.size() - 1, kNoRank};
    parts[count++] = {piece.size(), kNoRank};
    auto joined_rank = [&](size_t i) {
      return i + 3 < count ? rank(piece.substr(parts[i].start, parts[i + 3].start - parts[i].start)) : kNoRank;
    };
    while (count > 1) {
      uint32_t best = kNoRank;
      size_t at = 0;
      for (size_t i = 0; i + 1 < count; ++i)
        if (parts[i].rank < best) best = parts[i].rank, at = i;
      if (best == kNoRank) break;
      parts[at].rank = joined_rank(at);
      if (at > 0) parts[at - 1].rank = joined_rank(at - 1);
      std::copy(parts.begin() + static_cast<std::ptrdiff_t>(at) + 2, parts.begin() + static_cast<std::ptrdiff_t>(count),
                parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
      --count;
    }
    for (size_t i = 0; i + 1 < count; ++i)
      out.push_back(static_cast<int32_t>(rank(piece.substr(parts[i].start, parts[i + 1].start - parts[i].start))));
  }

  // The same merges in the same order, for long pieces: a heap of candidate pairs ordered by
  // (rank, position), so "lowest rank, leftmost first" is the top; stale entries are skipped.
  void merge_long(std::string_view piece, std::vector<int32_t>& out) const {
    const size_t n = piece.size();
    std::vector<size_t> next(n), previous(n);                             // linked list of part starts
    for (size_t i = 0; i < n; ++i) next[i] = i + 1, previous[i] = i - 1;  // previous[0] wraps: never read
    std::vector<bool> alive(n, true);
    using Candidate = std::tuple<uint32_t, size_t, size_t>;  // rank, left start, end of right part
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
    auto push = [&](size_t left) {
      if (left >= n || next[left] >= n) return;
      const size_t end = next[next[left]];
      const uint32_t r = rank(piece.substr(left, end - left));
      if (r != kNoRank) heap.emplace(r, left, end);
    };
    for (size_t i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
      const auto [r, left, end] = heap.top();
      heap.pop();
      if (!alive[left] || next[left] >= n || next[next[left]] != end) continue;  // stale
      const size_t right = next[left];
      alive[right] = false;
      next[left] = end;
      if (end < n) previous[end] = left;
      push(left);
      if (left > 0) push(previous[left]);
    }
    for (size_t i = 0; i < n; i = next[i]) out.push_back(static_cast<int32_t>(rank(piece.substr(i, next[i] - i))));
  }

  void encode_uncached(std::string_view piece, std::vector<int32_t>& out) const {
    if (const uint32_t whole = rank(piece); whole != kNoRank) {
      out.push_back(static_cast<int32_t>(whole));
    } else if (piece.size() >= kHeapMergeFrom) {
      merge_long(piece, out);
    } else {
      merge_short(piece, out);
    }
  }

  void encode_piece(std::string_view piece, std::vector<int32_t>& out, PieceCache& cache) const {
    if (piece.size() > kCachedPieceMax) return encode_uncached(piece, out);
    if (const PieceCache::Range* hit = cache.ranges.find(piece)) {
      out.insert(out.end(), cache.ids.begin() + hit->begin, cache.ids.begin() + hit->begin + hit->size);
      return;
    }
    const size_t before = out.size();
    encode_uncached(piece, out);
    const auto begin = static_cast<uint32_t>(cache.ids.size());
    cache.ids.insert(cache.ids.end(), out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
    cache.ranges.insert(piece, {begin, static_cast<uint32_t>(out.size() - before)});
  }

  // Pre-tokenizes one valid UTF-8 stretch and encodes each piece.
  void encode_valid(std::string_view text, pcre2_match_data* match, std::vector<int32_t>& out,
                    PieceCache& cache) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t offset = 0;
    while (offset < text.size()) {
      const int found =
          jit ? pcre2_jit_match(pattern.get(), subject, text.size(), offset, PCRE2_NO_UTF_CHECK, match, nullptr)
              : pcre2_match(pattern.get(), subject, text.size(), offset, PCRE2_NO_UTF_CHECK, match, nullptr);
      if (found < 0) {
        if (found == PCRE2_ERROR_NOMATCH) break;  // cannot happen: every character matches some branch
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(found, message, sizeof(message));
        throw RuntimeFailure(std::string("GPT-2 pre-tokenizer failed: ") + reinterpret_cast<char*>(message));
      }
      const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match);
      if (span[1] <= span[0]) throw RuntimeFailure("GPT-2 pre-tokenizer matched an empty piece");
      encode_piece(text.substr(span[0], span[1] - span[0]), out, cache);
      offset = span[1];
    }
  }

  std::vector<int32_t> encode(std::string_view text) const {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 16);
    std::unique_ptr<pcre2_match_data, MatchDataDeleter> match(
        pcre2_match_data_create_from_pattern(pattern.get(), nullptr));
    if (!match) throw RuntimeFailure("out of memory for the pre-tokenizer's match data");
    PieceCache cache;
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    size_t i = 0;
    while (i < text.size()) {
      const size_t valid = valid_utf8_prefix(bytes + i, text.size() - i);
      if (valid > 0) encode_valid(text.substr(i, valid), match.get(), out, cache);
      i += valid;
      if (i < text.size()) {
        out.push_back(static_cast<int32_t>(rank(text.substr(i, 1))));  // an invalid byte: its own token
        ++i;
      }
    }
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
  impl->pattern = compile_pattern();
  // JIT makes matching several times faster; without it (some platforms) the interpreter is still exact.
  impl->jit = pcre2_jit_compile(impl->pattern.get(), PCRE2_JIT_COMPLETE) == 0;
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
