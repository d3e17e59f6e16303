// Tokenizer-level tests that need no reference implementation: loading errors, added tokens,
// config handling, invalid input, streaming and concurrent use.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "core/check.h"
#include "tokenizer/added_tokens.h"

namespace moeserve::tokenizer {
namespace {

// A byte-level BPE over the 256 byte chars with a few merges and two added tokens.
nlohmann::json SmallTokenizerJson() {
  nlohmann::json vocab = nlohmann::json::object();
  // GPT-2 byte alphabet order: printable bytes keep their code point, the rest follow from 256.
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    std::string s;
    char32_t cp = printable ? char32_t(b) : char32_t(next++);
    if (cp < 0x80) {
      s.push_back(char(cp));
    } else {
      s.push_back(char(0xC0 | (cp >> 6)));
      s.push_back(char(0x80 | (cp & 0x3F)));
    }
    vocab[s] = b;
  }
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab["hello"] = 259;
  vocab["\xC4\xA0w"] = 260;  // "Ġw"
  return {
      {"version", "1.0"},
      {"added_tokens",
       {{{"id", 300}, {"content", "<s>"}, {"special", true}, {"normalized", false}},
        {{"id", 301}, {"content", "</s>"}, {"special", true}, {"normalized", false}},
        {{"id", 302}, {"content", "<s>x"}, {"special", false}, {"normalized", false}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<s>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {300}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"h e", "l l", "he ll", "hell o", "Ġ w"}}}}};
}

std::string LoadError(const nlohmann::json& j) {
  try {
    Tokenizer::FromJson(j);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Tokenizer, EncodesWithAddedTokensAndTemplate) {
  Tokenizer tok = Tokenizer::FromJson(SmallTokenizerJson());
  EXPECT_EQ(tok.Encode("hello", false), (std::vector<int32_t>{259}));
  EXPECT_EQ(tok.Encode("hello", true), (std::vector<int32_t>{300, 259}));
  // Longest added token wins ("<s>x" over "<s>"); "</s>" is separate.
  EXPECT_EQ(tok.Encode("<s>x</s>hello", false), (std::vector<int32_t>{302, 301, 259}));
  EXPECT_EQ(tok.Encode(" w", false), (std::vector<int32_t>{260}));
  EXPECT_TRUE(tok.Encode("", false).empty());
  EXPECT_EQ(tok.Decode(std::vector<int32_t>{300, 259, 301}, false), "<s>hello</s>");
  EXPECT_EQ(tok.Decode(std::vector<int32_t>{300, 259, 301, 302}, true), "hello<s>x");
  EXPECT_EQ(tok.VocabSize(), 303u);
  EXPECT_TRUE(tok.IsSpecial(300));
  EXPECT_FALSE(tok.IsSpecial(302));
  EXPECT_FALSE(tok.IsSpecial(259));
  EXPECT_EQ(tok.TokenToId("hello"), 259);
  EXPECT_EQ(tok.TokenToId("</s>"), 301);
  EXPECT_EQ(tok.IdToToken(260), "\xC4\xA0w");
  EXPECT_EQ(tok.IdToToken(999), "");
  EXPECT_FALSE(tok.TokenToId("nope").has_value());
}

TEST(Tokenizer, InvalidUtf8IsRepairedNotRejected) {
  Tokenizer tok = Tokenizer::FromJson(SmallTokenizerJson());
  EXPECT_EQ(tok.Encode("a\xFF"
                       "b",
                       false),
            tok.Encode("a\xEF\xBF\xBD"
                       "b",
                       false));
}

TEST(Tokenizer, UnsupportedComponentsAreNamed) {
  nlohmann::json j = SmallTokenizerJson();
  j["pre_tokenizer"] = {{"type", "X"}};
  EXPECT_NE(LoadError(j).find("unsupported pre_tokenizer type 'X'"), std::string::npos);
  j = SmallTokenizerJson();
  j["normalizer"] = {{"type", "Precompiled"}};
  EXPECT_NE(LoadError(j).find("unsupported normalizer type 'Precompiled'"), std::string::npos);
  j = SmallTokenizerJson();
  j["decoder"] = {{"type", "CTC"}};
  EXPECT_NE(LoadError(j).find("unsupported decoder type 'CTC'"), std::string::npos);
  j = SmallTokenizerJson();
  j["post_processor"] = {{"type", "Nope"}};
  EXPECT_NE(LoadError(j).find("unsupported post_processor type 'Nope'"), std::string::npos);
  j = SmallTokenizerJson();
  j["model"]["type"] = "WordPiece";
  EXPECT_NE(LoadError(j).find("unsupported model type 'WordPiece'"), std::string::npos);
  j = SmallTokenizerJson();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(("}}}, {"behavior", "Removed"}};
  EXPECT_NE(LoadError(j).find("pre_tokenizer Split"), std::string::npos);
  j = SmallTokenizerJson();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", "a"}}}, {"behavior", "Odd"}};
  EXPECT_NE(LoadError(j).find("unknown split behavior 'Odd'"), std::string::npos);
  EXPECT_NE(LoadError(nlohmann::json::array()).find("top level"), std::string::npos);
  EXPECT_THROW(Tokenizer::FromFile("/nonexistent/tokenizer.json"), Error);
}

TEST(Tokenizer, ConfigGivesBosEosAndAddBosOverride) {
  nlohmann::json config = {{"bos_token", "<s>"},
                           {"eos_token", {{"content", "</s>"}, {"special", true}}},
                           {"add_bos_token", false},
                           {"add_eos_token", true},
                           {"chat_template", "{{ x }}"}};
  Tokenizer tok = Tokenizer::FromJson(SmallTokenizerJson(), config);
  EXPECT_EQ(tok.BosId(), 300);
  EXPECT_EQ(tok.EosId(), 301);
  EXPECT_EQ(tok.Config()["chat_template"], "{{ x }}");
  // The flags replace the tokenizer.json template: no BOS, EOS appended.
  EXPECT_EQ(tok.Encode("hello", true), (std::vector<int32_t>{259, 301}));
  EXPECT_EQ(tok.Encode("hello", false), (std::vector<int32_t>{259}));
  Tokenizer plain = Tokenizer::FromJson(SmallTokenizerJson());
  EXPECT_FALSE(plain.BosId().has_value());
  EXPECT_TRUE(plain.Config().empty());
  config["eos_token"] = "<nope>";
  EXPECT_THROW(Tokenizer::FromJson(SmallTokenizerJson(), config), Error);
}

TEST(Tokenizer, StreamingReturnsOnlyWholeCharacters) {
  Tokenizer tok = Tokenizer::FromJson(SmallTokenizerJson());
  // "é" is two byte tokens, the emoji four: nothing may come out before the last byte.
  std::vector<int32_t> ids = tok.Encode("h\xC3\xA9\xF0\x9F\x98\x80!", false);
  ASSERT_EQ(ids.size(), 8u) << nlohmann::json(ids).dump();
  StreamingDetokenizer stream(tok, false);
  std::vector<std::string> parts;
  for (int32_t id : ids) parts.push_back(stream.Push(id));
  parts.push_back(stream.Flush());
  EXPECT_EQ(parts, (std::vector<std::string>{"h", "", "\xC3\xA9", "", "", "", "\xF0\x9F\x98\x80",
                                             "!", ""}));
  // A dangling partial character comes out as U+FFFD on Flush, as Decode gives it.
  StreamingDetokenizer tail(tok, true);
  std::string out = tail.Push(300);
  out += tail.Push(ids[3]);
  out += tail.Push(ids[4]);
  EXPECT_EQ(out, "") << nlohmann::json(ids).dump();
  out += tail.Flush();
  EXPECT_EQ(out, tok.Decode(std::vector<int32_t>{300, ids[3], ids[4]}, true));
  EXPECT_EQ(out, "\xEF\xBF\xBD");
}

TEST(Tokenizer, ConcurrentEncodeMatchesSerial) {
  Tokenizer tok = Tokenizer::FromJson(SmallTokenizerJson());
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) {
    texts.push_back("hello world " + std::to_string(i * 7919) + " <s>x \xE4\xB8\xAD" +
                    std::string(size_t(i % 13), ' ') + "hell" + std::to_string(i));
  }
  std::vector<std::vector<int32_t>> serial;
  for (const auto& t : texts) serial.push_back(tok.Encode(t));
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep) {
        for (size_t i = 0; i < texts.size(); ++i) {
          size_t k = (i * 31 + size_t(t) * 17 + size_t(rep)) % texts.size();
          if (tok.Encode(texts[k]) != serial[k]) ++failures[size_t(t)];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

TEST(Tokenizer, LoadsTrainedModelDir) {
  std::filesystem::path dir =
      std::filesystem::path(MOESERVE_TOKENIZER_EXPECTATIONS_DIR) / "minimax_small";
  if (!std::filesystem::exists(dir / "tokenizer.json")) GTEST_SKIP() << "not trained: " << dir;
  Tokenizer tok = Tokenizer::FromModelDir(dir.string());
  ASSERT_TRUE(tok.BosId().has_value());
  EXPECT_EQ(tok.BosId(), tok.TokenToId("]~!b["));
  EXPECT_EQ(tok.EosId(), tok.TokenToId("[e~["));
  EXPECT_TRUE(tok.Config()["chat_template"].is_string());
  auto ids = tok.Encode("]~!b[]~b]user\nWhat is 2+2?[e~[\n]~b]ai\n<think>\n", true);
  EXPECT_EQ(ids.front(), *tok.BosId());
  EXPECT_TRUE(tok.IsSpecial(ids.front()));
  EXPECT_EQ(tok.Decode(ids, false), "]~!b[]~b]user\nWhat is 2+2?[e~[\n]~b]ai\n<think>\n");
  EXPECT_EQ(tok.Decode(ids, true), "user\nWhat is 2+2?\nai\n\n");
}

}  // namespace
}  // namespace moeserve::tokenizer
