// Unit tests of the tokenizer's building blocks: UTF-8 handling, the regex wrapper, BPE merging.
#include <gtest/gtest.h>

#include <random>

#include "core/check.h"
#include "tokenizer/bpe.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace moeserve::tokenizer {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(TokenizerUnicode, LossyMatchesRustMaximalSubpartRule) {
  EXPECT_EQ(Utf8Lossy("abc"), "abc");
  EXPECT_EQ(Utf8Lossy("\xC3\xA9"), "\xC3\xA9");
  EXPECT_EQ(Utf8Lossy("\xF0\x9F\x98"), kFffd);                  // truncated 4-byte char: one
  EXPECT_EQ(Utf8Lossy("\xC3\x28"), kFffd + "(");                // bad continuation
  EXPECT_EQ(Utf8Lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogate: byte by byte
  EXPECT_EQ(Utf8Lossy("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
  EXPECT_EQ(Utf8Lossy("\xE2\x82"), kFffd);
  EXPECT_EQ(Utf8Lossy("\xE2\x82x\xE2\x82\xAC"), kFffd + "x\xE2\x82\xAC");
  EXPECT_EQ(Utf8Lossy("\xC0\xAF"), kFffd + kFffd);  // overlong
  EXPECT_EQ(Utf8Lossy("\xFF"), kFffd);
  EXPECT_TRUE(IsValidUtf8("h\xC3\xA9llo \xF0\x9F\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));
}

TEST(TokenizerUnicode, ByteLevelAlphabetIsABijection) {
  const ByteLevelAlphabet& a = GetByteLevelAlphabet();
  EXPECT_EQ(a.byte_to_char[' '], char32_t(0x120));   // 'Ġ'
  EXPECT_EQ(a.byte_to_char['\n'], char32_t(0x10A));  // 'Ċ'
  EXPECT_EQ(a.byte_to_char['a'], char32_t('a'));
  for (int b = 0; b < 256; ++b) EXPECT_EQ(a.char_to_byte[a.byte_to_char[b]], b);
}

TEST(TokenizerUnicode, CharacterClassesFollowRust) {
  EXPECT_TRUE(IsWhitespace(0x85));
  EXPECT_TRUE(IsWhitespace(0x3000));
  EXPECT_FALSE(IsWhitespace(0x200B));
  EXPECT_TRUE(IsNumeric(0x00BD));  // ½ (No)
  EXPECT_TRUE(IsNumeric(0x0663));  // Arabic-Indic 3
  EXPECT_FALSE(IsNumeric('a'));
  EXPECT_TRUE(IsWordChar(0x0301));  // combining acute
  EXPECT_TRUE(IsWordChar('_'));
  EXPECT_FALSE(IsWordChar('-'));
  std::string lower;
  AppendLowercase(0x0130, lower);  // İ -> i + combining dot
  EXPECT_EQ(lower, "i\xCC\x87");
  EXPECT_EQ(Normalize("e\xCC\x81", NormalForm::kNfc), "\xC3\xA9");
  EXPECT_EQ(Normalize("\xEF\xAC\x81", NormalForm::kNfkc), "fi");
}

TEST(TokenizerRegex, TranslatesOnlyOnigurumaSpecificEscapes) {
  EXPECT_EQ(Regex::Translate(R"(\h+|[\h_]|\H)"), R"([0-9a-fA-F]+|[0-9a-fA-F_]|[^0-9a-fA-F])");
  const std::string o200k =
      R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  EXPECT_EQ(Regex::Translate(o200k), o200k);
  Regex re(o200k, "test");
  std::vector<std::pair<size_t, size_t>> m;
  std::string text = "Hello WORLD's 12345\n\n  x";
  re.FindAll(text, m);
  std::vector<std::string> words;
  for (auto [b, e] : m) words.push_back(text.substr(b, e - b));
  EXPECT_EQ(words,
            (std::vector<std::string>{"Hello", " WORLD's", " ", "123", "45", "\n\n", " ", " x"}));
}

TEST(TokenizerRegex, BadPatternNamesTheComponent) {
  try {
    Regex re("(unclosed", "pre_tokenizer Split");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pre_tokenizer Split"), std::string::npos) << e.what();
  }
}

TEST(TokenizerRegex, EmptyMatchesAdvanceByOneCharacter) {
  Regex re("x*", "test");
  std::vector<std::pair<size_t, size_t>> m;
  re.FindAll("a\xC3\xA9x", m);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[1], std::make_pair(size_t(1), size_t(1)));
  EXPECT_EQ(m[2], std::make_pair(size_t(3), size_t(4)));
}

// Random merges over a 4-letter alphabet: the short-word scan and the long-word heap must pick
// the same merges in the same order.
TEST(TokenizerBpe, ScanAndHeapMergeIdentically) {
  std::mt19937 rng(7);
  nlohmann::json vocab = nlohmann::json::object();
  std::vector<std::string> tokens = {"a", "b", "c", "d"};
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
  nlohmann::json merges = nlohmann::json::array();
  for (int m = 0; m < 60; ++m) {
    const std::string l = tokens[rng() % tokens.size()];
    const std::string r = tokens[rng() % tokens.size()];
    if (l.size() + r.size() > 6) continue;
    std::string merged = l + r;
    if (!vocab.contains(merged)) {
      vocab[merged] = tokens.size();
      tokens.push_back(merged);
    }
    merges.push_back(l + " " + r);
  }
  BpeModel model(nlohmann::json{{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}});
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<int32_t> word(1 + rng() % 48);
    for (auto& id : word) id = int32_t(rng() % 4);
    std::vector<int32_t> scan = word, heap = word;
    model.MergeSymbols(scan, false);
    model.MergeSymbols(heap, true);
    ASSERT_EQ(scan, heap) << "trial " << trial;
  }
}

TEST(TokenizerBpe, BothMergeSerializationsAgree) {
  nlohmann::json vocab = {{"a", 0}, {"b", 1}, {"ab", 2}, {"abb", 3}};
  BpeModel strings(
      nlohmann::json{{"vocab", vocab}, {"merges", nlohmann::json::array({"a b", "ab b"})}});
  BpeModel pairs(
      nlohmann::json{{"vocab", vocab},
                     {"merges", nlohmann::json::array({nlohmann::json::array({"a", "b"}),
                                                       nlohmann::json::array({"ab", "b"})})}});
  std::vector<int32_t> x, y;
  strings.Tokenize("abbab", false, x);
  pairs.Tokenize("abbab", false, y);
  EXPECT_EQ(x, (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(x, y);
}

TEST(TokenizerBpe, MalformedModelsNameTheProblem) {
  auto message = [](const nlohmann::json& model) -> std::string {
    try {
      BpeModel m(model);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message({{"vocab", {{"a", 0}}}, {"merges", nlohmann::json::array({"a b"})}})
                .find("merge token 'b'"),
            std::string::npos);
  EXPECT_NE(
      message({{"vocab", {{"a", 0}}}, {"merges", nlohmann::json::array({"a"})}}).find("merge 0"),
      std::string::npos);
  EXPECT_NE(message({{"merges", nlohmann::json::array()}}).find("'vocab'"), std::string::npos);
  EXPECT_NE(message({{"vocab", {{"a", 0}}}, {"unk_token", "<unk>"}}).find("unk_token"),
            std::string::npos);
}

}  // namespace
}  // namespace moeserve::tokenizer
