// The GPT-2 tokenizer against facts from tiktoken, against a slow literal reference (the whole of tiny
// shakespeare and random strings), its piece boundaries, round trips, invalid UTF-8, long runs in linear time
// and a brief fuzz run. tests/datasets/tiktoken_parity.py compares with tiktoken itself where it is installed.
#include <gtest/gtest.h>

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/errors.h"
#include "datasets/data_files.h"
#include "datasets/gpt2_tokenizer.h"
#include "tests/datasets/reference_tokenizer.h"
#include "tests/support/tokenizer.h"

namespace {

using datasets::GPT2Tokenizer;
using Ids = std::vector<int32_t>;

using speedlabs::testing::ReferenceGPT2;
using speedlabs::testing::shared_tokenizer;

const ReferenceGPT2& reference() {
  static const ReferenceGPT2 loaded(shared_tokenizer());
  return loaded;
}

std::string shakespeare() {
  std::ifstream in(datasets::require_file(datasets::resolve_data_dir(), datasets::kShakespearePath), std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Ids repeated(const Ids& unit, size_t times, const Ids& tail = {}) {
  Ids out;
  for (size_t i = 0; i < times; ++i) out.insert(out.end(), unit.begin(), unit.end());
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

// Facts from tiktoken 0.14.0, `gpt2` built from the data directory's files:
//   ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(".../gpt2/vocab.bpe", ".../gpt2/encoder.json")
//   enc = tiktoken.Encoding(name="gpt2", pat_str=<tiktoken's gpt2 pattern>, mergeable_ranks=ranks,
//                           special_tokens={"<|endoftext|>": 50256})
//   enc.encode_ordinary(text)
struct Fact {
  const char* name;
  std::string text;
  Ids ids;
};

const std::vector<Fact>& tiktoken_facts() {
  static const std::vector<Fact> facts = {
      {"punctuation", "Hello, world!", {15496, 11, 995, 0}},
      {"contractions",
       "I'm sure they'll say we've done it, don't you'd think?",
       {40, 1101, 1654, 484, 1183, 910, 356, 1053, 1760, 340, 11, 836, 470, 345, 1549, 892, 30}},
      {"upper_case_contractions_are_not", "HE'S SHOUTING'LL", {13909, 6, 50, 6006, 12425, 2751, 6, 3069}},
      {"mixed_case_contractions", "don'T 's 'S", {9099, 6, 51, 705, 82, 705, 50}},
      {"leading_trailing_spaces", "  leading and trailing  ", {220, 3756, 290, 25462, 220, 220}},
      {"tabs_newlines",
       "tabs\tand\nnewlines\n\n\n  indented",
       {8658, 82, 197, 392, 198, 3605, 6615, 628, 198, 220, 773, 4714}},
      {"space_before_newline", "   \n  x", {220, 220, 220, 198, 220, 2124}},
      {"digits",
       "1234567890 3.14159 1,000,000",
       {10163, 2231, 30924, 3829, 513, 13, 1415, 19707, 352, 11, 830, 11, 830}},
      {"latin_accents", "na\u00efve caf\u00e9 d\u00e9j\u00e0 vu", {2616, 38776, 40304, 39073, 73, 24247, 410, 84}},
      {"cyrillic_greek",
       "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 "
       "\u03ba\u03cc\u03c3\u03bc\u03b5",
       {140,   253, 21169, 18849, 38857, 16843, 20375, 11,  12466, 120, 18849, 21169, 0,     7377,  241,  30950,
        29945, 138, 105,   18074, 225,   26517, 139,   227, 7377,  118, 139,   234,   38392, 34703, 30950}},
      {"cjk",
       "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3001\u4e2d\u6587\u6587\u672c",
       {33768, 98, 17312, 105, 45739, 252, 5641, 24336, 25084, 43302, 23513, 40792, 23877, 229, 23877, 229, 17312,
        105}},
      {"emoji",
       "emoji \U0001F600\U0001F44D\U0001F3FD family \U0001F468\u200d\U0001F469\u200d\U0001F467",
       {368,   31370, 30325, 222, 41840, 235, 8582, 237, 121,   1641,
        50169, 101,   447,   235, 41840, 102, 447,  235, 41840, 100}},
      {"endoftext_is_text", "<|endoftext|>", {27, 91, 437, 1659, 5239, 91, 29}},
      {"unicode_spaces", "a\u00a0b\u2003c\u3000d", {64, 1849, 65, 447, 225, 66, 5099, 222, 67}},
      {"other_numbers",
       "\u0663\u0664\u0665 numbers \u2177 \u00bd",
       {149, 96, 149, 97, 149, 98, 3146, 2343, 227, 115, 25208}},
      {"symbol_runs", "$$$!!!???...", {13702, 3, 10185, 28358, 986}},
      // U+180E is not White_Space for tiktoken (it is for PCRE2's \s), U+0085 is.
      {"mongolian_vowel_separator", "a\u180e's", {64, 157, 254, 236, 6, 82}},
      {"mongolian_after_space", "\u2007\u180e're", {447, 229, 157, 254, 236, 6, 260}},
      {"next_line", "x \u0085 y", {87, 1587, 227, 331}},
      {"next_line_before_letter", " \u0085x", {220, 126, 227, 87}},
      // Long pieces (the heap merge path).
      {"long_letter_run", std::string(150, 'a'), repeated({24794}, 37, {7252})},
      {"long_word_run",
       [] {
         std::string s;
         for (int i = 0; i < 50; ++i) s += "abc";
         return s + " end";
       }(),
       repeated({39305}, 50, {886})},
      {"long_emoji_run",
       [] {
         std::string s;
         for (int i = 0; i < 40; ++i) s += "\U0001F600";
         return s;
       }(),
       repeated({47249, 222}, 40)},
      {"long_space_run", std::string(120, ' ') + "x", repeated({220}, 119, {2124})},
      // Added with the hand-written pre-tokenizer, each printed by tiktoken 0.14.0 as above.
      // U+1C89 is a letter since Unicode 16 (tiktoken's tables), not in Python 3.11's unicodedata (Unicode 14).
      {"unicode16_letter", "a\u1c89b 1\u1c89", {64, 157, 110, 231, 65, 352, 157, 110, 231}},
      {"space_runs_before_unicode_space", "a \u3000b  \u00a0c", {64, 220, 5099, 222, 65, 220, 220, 1849, 66}},
      {"tabs_before_word", "\t\tx\n\n\n", {197, 197, 87, 628, 198}},
      {"contraction_after_symbol",
       "?!'s ''s 'd'll're've'm't",
       {12248, 6, 82, 10148, 82, 705, 67, 1183, 821, 1053, 1101, 470}},
      {"apostrophe_variants", "it\u2019s it's IT'S", {270, 447, 247, 82, 340, 338, 7283, 6, 50}},
      {"digits_and_letters", "abc123def 4567 8.9e10", {39305, 10163, 4299, 4153, 3134, 807, 13, 24, 68, 940}},
      {"crlf_runs", "a\r\n\r\nb", {64, 201, 198, 201, 198, 65}},
      {"emoji_run_with_modifiers",
       "\U0001F44D\U0001F3FD\U0001F44D\U0001F3FD!",
       {41840, 235, 8582, 237, 121, 41840, 235, 8582, 237, 121, 0}},
  };
  return facts;
}

TEST(GPT2Tokenizer, ShakespeareIs338025TokensStartingAsTiktokenDoes) {
  const Ids ids = shared_tokenizer().encode(shakespeare());
  EXPECT_EQ(ids.size(), 338025u);  // ../shared/datasets/README.md (tiktoken gpt2)
  ASSERT_GE(ids.size(), 16u);
  const Ids first16 = {5962, 22307, 25, 198, 8421, 356, 5120, 597, 2252, 11, 3285, 502, 2740, 13, 198, 198};
  EXPECT_EQ(Ids(ids.begin(), ids.begin() + 16), first16);
  EXPECT_EQ(shared_tokenizer().decode(ids), shakespeare());
}

TEST(GPT2Tokenizer, MatchesTiktokenOnHandPickedStrings) {
  for (const Fact& fact : tiktoken_facts()) {
    EXPECT_EQ(shared_tokenizer().encode(fact.text), fact.ids) << fact.name;
    EXPECT_EQ(shared_tokenizer().decode(fact.ids), fact.text) << fact.name;
  }
}

TEST(GPT2Tokenizer, EmptyInputGivesNoTokens) {
  EXPECT_TRUE(shared_tokenizer().encode("").empty());
  EXPECT_TRUE(shared_tokenizer().encode_allowing_special("").empty());
  EXPECT_EQ(shared_tokenizer().decode({}), "");
}

TEST(GPT2Tokenizer, EndOfTextOnlyWhenAllowed) {
  EXPECT_EQ(GPT2Tokenizer::kEndOfText, 50256);
  EXPECT_EQ(shared_tokenizer().decode({GPT2Tokenizer::kEndOfText}), "<|endoftext|>");
  // tiktoken: enc.encode("a<|endoftext|>b", allowed_special="all") == [64, 50256, 65]
  EXPECT_EQ(shared_tokenizer().encode_allowing_special("a<|endoftext|>b"), (Ids{64, 50256, 65}));
  EXPECT_EQ(shared_tokenizer().encode_allowing_special("<|endoftext|><|endoftext|>"), (Ids{50256, 50256}));
  for (const int32_t id : shared_tokenizer().encode("a<|endoftext|>b")) EXPECT_NE(id, GPT2Tokenizer::kEndOfText);
}

TEST(GPT2Tokenizer, InvalidUtf8BytesBecomeTheirSingleByteTokens) {
  // Each sequence is invalid UTF-8: a lone 0xFF, a stray continuation byte, an overlong '/', an
  // encoded surrogate, a code point above U+10FFFF, a truncated euro sign at the end.
  const std::vector<std::string> invalid = {"\xff", "\x80", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82"};
  for (const std::string& bytes : invalid) {
    const Ids ids = shared_tokenizer().encode(bytes);
    ASSERT_EQ(ids.size(), bytes.size()) << "one token per invalid byte";
    for (size_t i = 0; i < bytes.size(); ++i) EXPECT_EQ(shared_tokenizer().token_bytes(ids[i]), bytes.substr(i, 1));
    EXPECT_EQ(shared_tokenizer().decode(ids), bytes);
  }
  // The valid text around an invalid byte is encoded as it would be on its own: 0xFF is byte
  // token 187 in GPT-2's byte order (printable Latin-1 first: 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF).
  EXPECT_EQ(shared_tokenizer().encode("Hello\xff world"), (Ids{15496, 187, 995}));
  const std::string mixed = "caf\xc3\xa9\xc3 don't \xf0\x9f\x98 \xf0\x9f\x98\x80!";
  EXPECT_EQ(shared_tokenizer().decode(shared_tokenizer().encode(mixed)), mixed);
}

TEST(GPT2Tokenizer, DecodeRejectsIdsOutsideTheVocabulary) {
  EXPECT_THROW(shared_tokenizer().decode({1, 50257}), speedlabs::UsageError);
  EXPECT_THROW(shared_tokenizer().decode({-1}), speedlabs::UsageError);
  EXPECT_EQ(shared_tokenizer().token_bytes(220), " ");
}

TEST(GPT2Tokenizer, LoadingFailsClearlyOnMalformedFiles) {
  const auto directory = std::filesystem::temp_directory_path() / ("speedlabs-bad-bpe-" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  const auto data = datasets::resolve_data_dir();
  { std::ofstream(directory / "encoder.json") << "{\"a\": 0}"; }
  try {
    GPT2Tokenizer::from_files(directory / "encoder.json", data / datasets::kVocabBpePath);
    ADD_FAILURE() << "a 1-token encoder.json was accepted";
  } catch (const speedlabs::RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("encoder.json"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(directory);
}

// What the pre-tokenizer cuts, piece by piece, for strings where GPT-2's pattern is subtle: the white-space
// look-ahead leaves a run's last character to the next piece, the optional space belongs only to U+0020,
// contractions are lower case only, an apostrophe otherwise joins a run of other characters, and an invalid
// byte ends the text before it.
TEST(GPT2Tokenizer, PretokenizeCutsAsThePatternDoes) {
  using Pieces = std::vector<std::string>;
  const std::vector<std::pair<std::string, Pieces>> cases = {
      {"Hello world", {"Hello", " world"}},
      {"   x", {"  ", " x"}},
      {"x   ", {"x", "   "}},
      {"a \u3000b", {"a", " ", "\u3000", "b"}},
      {"\t\tx", {"\t", "\t", "x"}},
      {" \u0085x", {" ", "\u0085", "x"}},
      {"x\n\n y", {"x", "\n\n", " y"}},
      {"don't DON'T", {"don", "'t", " DON", "'", "T"}},
      {"'s'S 's", {"'s", "'", "S", " '", "s"}},
      {"?!'s", {"?!'", "s"}},
      {"'ll'lll'vee", {"'ll", "'ll", "l", "'ve", "e"}},
      {"1234abc 42", {"1234", "abc", " 42"}},
      {"\u00bd\u00b2\u2167x", {"\u00bd\u00b2\u2167", "x"}},
      {"\u180e's", {"\u180e'", "s"}},
      {"a\xff b", {"a", "\xff", " b"}},
      {"  \xff", {"  ", "\xff"}},
      {" \xe2\x82", {" ", "\xe2", "\x82"}},
      {"", {}},
  };
  for (const auto& [text, expected] : cases) {
    const std::vector<std::string_view> pieces = shared_tokenizer().pretokenize(text);
    EXPECT_EQ(Pieces(pieces.begin(), pieces.end()), expected) << testing::PrintToString(text);
    EXPECT_EQ(reference().pieces(text), expected) << "the reference, " << testing::PrintToString(text);
    EXPECT_EQ(shared_tokenizer().count_pieces(text), expected.size());
  }
}

// The whole of tiny shakespeare, token for token, against the slow literal reference.
TEST(GPT2Tokenizer, ShakespeareMatchesTheSlowReference) {
  const std::string text = shakespeare();
  const Ids ids = shared_tokenizer().encode(text);
  const Ids expected = reference().encode(text);
  ASSERT_EQ(ids.size(), expected.size());
  const auto first = std::mismatch(ids.begin(), ids.end(), expected.begin());
  EXPECT_TRUE(first.first == ids.end()) << "first difference at token " << (first.first - ids.begin());
}

// Random strings of letters, numbers, every kind of space, contractions, marks, emoji, invalid bytes and runs
// of up to 300 bytes (the long-piece merge), against the slow reference; and encode() against its two steps.
TEST(GPT2Tokenizer, RandomStringsMatchTheSlowReference) {
  const std::vector<std::string> atoms = {"a",
                                          "Z",
                                          "q",
                                          "\xc3\xa9",
                                          "\xc3\x9f",
                                          "\xd0\x96",
                                          "\xe6\x97\xa5",
                                          "\xe1\xb2\x89",
                                          "7",
                                          "\xd9\xa3",
                                          "\xe2\x85\xb7",
                                          "\xc2\xbd",
                                          " ",
                                          " ",
                                          " ",
                                          "\t",
                                          "\n",
                                          "\r",
                                          "\x0b",
                                          "\xc2\x85",
                                          "\xc2\xa0",
                                          "\xe2\x80\x80",
                                          "\xe3\x80\x80",
                                          "\xe1\xa0\x8e",
                                          "\xe2\x80\x8b",
                                          "'",
                                          "'s",
                                          "'t",
                                          "'re",
                                          "'ve",
                                          "'m",
                                          "'ll",
                                          "'d",
                                          "'S",
                                          "!",
                                          "?",
                                          ".",
                                          "-",
                                          "\xcc\x81",
                                          "\xf0\x9f\x98\x80",
                                          "\xe2\x80\x8d",
                                          "\x00",
                                          "<|endoftext|>",
                                          "\xff",
                                          "\x80",
                                          "\xc3",
                                          "\xe2\x82",
                                          "\xed\xa0\x80",
                                          "\xc0\xaf",
                                          "\xf4\x90\x80\x80"};
  const std::vector<std::string> run_units = {
      "a", "ab", " ", "\n", "1", "!", "\xc3\xa9", "\xf0\x9f\x98\x80", "\xe3\x80\x80", "z9", "\r\n"};
  // Long pieces of varied text (words without spaces, digits, symbols): merging them makes pairs that rank
  // before the one just merged ("ng" then "i" + "ng"), which the long-piece merge must take first.
  const std::vector<std::string> words = {"the", "quick", "brown", "fox",   "jumps",        "over",       "lazy", "dog",
                                          "ing", "tion",  "Hello", "WORLD", "na\xc3\xafve", "3141592653", "2718", "<=>",
                                          "!?",  "-->",   "::",    "'"};
  std::mt19937_64 random(20240502);
  for (int run = 0; run < 3000; ++run) {
    std::string text;
    const size_t length = random() % 24;
    for (size_t i = 0; i < length; ++i) {
      if (random() % 32 == 0) {
        for (size_t k = 10 + random() % 60; k > 0; --k) text += words[random() % words.size()];
      } else if (random() % 16 == 0) {
        const std::string& unit = run_units[random() % run_units.size()];
        for (size_t k = 20 + random() % 130; k > 0; --k) text += unit;
      } else {
        text += atoms[random() % atoms.size()];
      }
    }
    const Ids ids = shared_tokenizer().encode(text);
    ASSERT_EQ(ids, reference().encode(text)) << "run " << run << ": " << testing::PrintToString(text);
    const std::vector<std::string_view> pieces = shared_tokenizer().pretokenize(text);
    ASSERT_EQ(shared_tokenizer().encode_pieces(pieces, true), ids) << testing::PrintToString(text);
    ASSERT_EQ(shared_tokenizer().encode_pieces(pieces, false), ids) << testing::PrintToString(text);
  }
}

// GPT-2's spelling of bytes in its files (bytes_to_unicode): printable Latin-1 as itself, the other 68 bytes as
// U+0100 on; `order` gets the bytes in rank order (printable first), which is how ids are given to them.
std::string spelled(const std::string& bytes, std::vector<uint8_t>* order = nullptr) {
  std::array<uint32_t, 256> code_point{};
  uint32_t extra = 256;
  for (int pass = 0; pass < 2; ++pass)
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      if (printable != (pass == 0)) continue;
      if (order) order->push_back(static_cast<uint8_t>(b));
      if (pass == 0) code_point[b] = b;
    }
  for (uint32_t b = 0; b < 256; ++b)
    if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) code_point[b] = extra++;
  std::string out;
  for (const unsigned char b : bytes) {
    const uint32_t c = code_point[b];
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// A merge can make a pair ranked before the one being merged: tiktoken then takes that pair next, before the
// other pairs of the current rank. GPT-2's own ranks rarely make it matter inside one long piece, so this
// vocabulary is made for it: "aba" ranks before "ab" (the files list any bytes for a merge). In "abab...",
// tiktoken makes "ab", then "aba" at once (consuming the next "a"), then the next "ab": aba, b, aba, b, ...
// Taking all the "ab" first would give ab, ab, ab. 49,998 filler merges of bytes no string here uses.
TEST(GPT2Tokenizer, LongPieceMergesTakeALowerRankFirst) {
  std::vector<uint8_t> order;
  spelled("", &order);
  std::vector<std::string> tokens;
  for (const uint8_t b : order) tokens.emplace_back(1, static_cast<char>(b));
  std::ostringstream merges;
  merges << "#version: 0.2\n";
  auto merge = [&](const std::string& left, const std::string& right) {
    merges << spelled(left) << " " << spelled(right) << "\n";
    tokens.push_back(left + right);
  };
  merge("a", "ba");
  merge("a", "b");
  for (int i = 0; tokens.size() < static_cast<size_t>(GPT2Tokenizer::kEndOfText); ++i)
    merge(std::string(1, static_cast<char>(0x80 + i % 128)),
          std::string{static_cast<char>(0x80 + (i / 128) % 128), static_cast<char>(0x80 + i / 16384)});
  nlohmann::json encoder = nlohmann::json::object();
  for (size_t id = 0; id < tokens.size(); ++id) encoder[spelled(tokens[id])] = id;
  encoder["<|endoftext|>"] = GPT2Tokenizer::kEndOfText;
  const auto directory = std::filesystem::temp_directory_path() / ("speedlabs-aba-bpe-" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  { std::ofstream(directory / "encoder.json") << encoder.dump(); }
  { std::ofstream(directory / "vocab.bpe") << merges.str(); }
  const GPT2Tokenizer aba = GPT2Tokenizer::from_files(directory / "encoder.json", directory / "vocab.bpe");
  std::filesystem::remove_all(directory);
  const ReferenceGPT2 slow(aba);
  const int32_t kAba = 256, kB = static_cast<int32_t>(std::find(order.begin(), order.end(), 'b') - order.begin());
  std::string text;
  for (int i = 0; i < 40; ++i) text += "ab";  // 80 bytes: a long piece
  EXPECT_EQ(aba.encode(text), repeated({kAba, kB}, 20)) << "tiktoken's order";
  EXPECT_EQ(slow.encode(text), repeated({kAba, kB}, 20)) << "the reference";
  std::mt19937_64 random(7);
  for (int run = 0; run < 300; ++run) {
    std::string mixed;
    for (size_t k = 10 + random() % 300; k > 0; --k) mixed += random() % 3 == 0 ? "a" : random() % 2 ? "ab" : "b";
    ASSERT_EQ(aba.encode(mixed), slow.encode(mixed)) << mixed;
  }
}

// One tokenizer, four threads at once (each keeps its own long-merge memory and word cache): the same ids as
// one thread gives, for text, long runs and a run long enough to go through the long-piece merge.
TEST(GPT2Tokenizer, ThreadsShareOneTokenizer) {
  std::vector<std::string> texts = {shakespeare().substr(0, 200000), std::string(300000, 'a'),
                                    std::string(5000, '!') + " ok", "don't \xff stop \xe3\x80\x80 now"};
  std::string pairs;
  for (int i = 0; i < 50000; ++i) pairs += "ab";
  texts.push_back(pairs);
  std::vector<Ids> expected;
  for (const std::string& text : texts) expected.push_back(shared_tokenizer().encode(text));
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round)
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t k = (i + static_cast<size_t>(t)) % texts.size();
          if (shared_tokenizer().encode(texts[k]) != expected[k]) ++wrong;
        }
    });
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
}

// The CPU time this thread has used: unlike the wall clock, it stops while another program has the core.
double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// A megabyte of one character, or of a pair, is one piece (rescanning every pair after each merge would be quadratic in
// it). Encoding it must cost about as much per byte as 128 KB does: a ratio, not a time, and a generous bound (linear
// gives about 1, quadratic 8), each side the fastest of three by this thread's CPU time.
TEST(GPT2Tokenizer, LongRunsTakeTimeProportionalToTheirLength) {
  for (const std::string unit : {"a", "ab", "\n", "!", "\xc3\xa9"}) {
    double per_byte[2];
    for (int side = 0; side < 2; ++side) {
      std::string text;
      const size_t length = side == 0 ? size_t{1} << 17 : size_t{1} << 20;
      while (text.size() < length) text += unit;
      double best = 1e9;
      for (int repeat = 0; repeat < 3; ++repeat) {
        const double start = thread_cpu_seconds();
        const size_t tokens = shared_tokenizer().encode(text).size();
        best = std::min(best, thread_cpu_seconds() - start);
        ASSERT_GT(tokens, 0u);
      }
      per_byte[side] = std::max(best, 1e-6) / static_cast<double>(text.size());
    }
    const double ratio = per_byte[1] / per_byte[0];
    RecordProperty("ratio_" + std::to_string(static_cast<int>(static_cast<uint8_t>(unit[0]))), std::to_string(ratio));
    EXPECT_LT(ratio, 3.0) << "time per byte at 1 MiB over at 128 KiB, unit " << testing::PrintToString(unit);
  }
}

// Random byte strings built from pieces that stress the tokenizer (valid and broken UTF-8, every
// kind of space, contractions, digits, long runs): encode must give vocabulary ids only and decode
// must give back the bytes. Runs about a second with a fixed seed, so a failure reproduces.
TEST(GPT2Tokenizer, FuzzEncodeDecodeRoundTrip) {
  const std::vector<std::string> pieces = {"a",
                                           "Z",
                                           "9",
                                           "'",
                                           "'s",
                                           "'ll",
                                           "'RE",
                                           " ",
                                           "  ",
                                           "\t",
                                           "\n",
                                           "\r\n",
                                           "\xc2\xa0",
                                           "\xc2\x85",
                                           "\xe1\xa0\x8e",
                                           "\xe2\x80\x80",
                                           "\xe3\x80\x80",
                                           "\xc3\xa9",
                                           "\xd0\x96",
                                           "\xe6\x97\xa5",
                                           "\xf0\x9f\x98\x80",
                                           "\xe2\x80\x8d",
                                           "\xcc\x81",
                                           "\xd9\xa3",
                                           "\xe2\x85\xb7",
                                           "!",
                                           "...",
                                           "<|endoftext|>",
                                           "\xff",
                                           "\x80",
                                           "\xc3",
                                           "\xe2\x82",
                                           "\xf0\x9f",
                                           "\xed\xa0\x80",
                                           "\xc0\xaf",
                                           "\x00",
                                           "\x1f",
                                           std::string(100, 'x'),
                                           std::string(97, ' ')};
  std::mt19937_64 random(20240501);
  const auto stop = std::chrono::steady_clock::now() + std::chrono::milliseconds(800);
  int runs = 0;
  while (std::chrono::steady_clock::now() < stop || runs < 200) {
    std::string text;
    const size_t length = random() % 40;
    for (size_t i = 0; i < length; ++i) {
      if (random() % 4 == 0) {
        text += static_cast<char>(random() % 256);  // any byte at all
      } else {
        text += pieces[random() % pieces.size()];
      }
    }
    const Ids ids = shared_tokenizer().encode(text);
    for (const int32_t id : ids) ASSERT_TRUE(id >= 0 && id < GPT2Tokenizer::kEndOfText) << "id " << id;
    ASSERT_EQ(shared_tokenizer().decode(ids), text) << "round trip failed after " << runs << " runs";
    ++runs;
  }
  RecordProperty("fuzz_runs", runs);
}

}  // namespace
