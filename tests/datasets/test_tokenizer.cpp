// The GPT-2 tokenizer against facts from tiktoken, round trips, invalid UTF-8 and a brief fuzz run.
#include <gtest/gtest.h>

#include <unistd.h>
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>

#include "common/errors.h"
#include "datasets/data_files.h"
#include "datasets/gpt2_tokenizer.h"
#include "tests/support/tokenizer.h"

namespace {

using datasets::GPT2Tokenizer;
using Ids = std::vector<int32_t>;

using speedlabs::testing::shared_tokenizer;

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
