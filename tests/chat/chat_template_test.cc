// The renderer against @huggingface/jinja on real chat templates (MiniMax-M2, Qwen3, Llama 3):
// every case written by tools/chat/render_reference.mjs must render byte-identically, and cases
// where the reference raises must raise here too.
#include "chat/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "chat/reply_parser.h"
#include "core/check.h"

namespace moeserve::chat {
namespace {

using ojson = nlohmann::ordered_json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(MOESERVE_CHAT_REFERENCE)) {
      GTEST_SKIP() << "no " << MOESERVE_CHAT_REFERENCE << " (needs node + node_modules; run ctest)";
    }
    data_ = ojson::parse(ReadFile(MOESERVE_CHAT_REFERENCE));
  }
  ojson data_;
};

TEST_F(ReferenceTest, AllCasesMatchHuggingFaceJinja) {
  std::map<std::string, ChatTemplate> templates;
  for (auto it = data_["templates"].begin(); it != data_["templates"].end(); ++it) {
    templates.emplace(it.key(), ChatTemplate::Parse(it.value()["source"].get<std::string>()));
  }
  int compared = 0, errors = 0;
  std::set<std::string> conversations;
  for (const auto& c : data_["cases"]) {
    const std::string name = c["name"];
    const ChatTemplate& t = templates.at(c["template"].get<std::string>());
    std::string got;
    std::string error;
    try {
      got = ApplyChatTemplate(t, c["messages"], c["tools"], c["add_generation_prompt"].get<bool>(),
                              c["extra"]);
    } catch (const Error& e) {
      error = e.what();
    }
    if (c.contains("error")) {
      EXPECT_FALSE(error.empty()) << name << ": reference raised '" << c["error"]
                                  << "' but we rendered:\n"
                                  << got;
      ++errors;
    } else {
      ASSERT_TRUE(error.empty()) << name << ": " << error;
      EXPECT_EQ(got, c["expected"].get<std::string>()) << name;
      ++compared;
    }
    conversations.insert(name.substr(0, name.rfind('/')));
  }
  std::printf("compared %d renders (%zu template x conversation pairs), %d expected errors\n",
              compared, conversations.size(), errors);
  EXPECT_GE(conversations.size(), 40u);
}

TEST_F(ReferenceTest, FeatureSnippetsMatchHuggingFaceJinja) {
  int n = 0;
  for (const auto& s : data_["snippets"]) {
    const std::string src = s["source"];
    std::string got, error;
    try {
      got = ChatTemplate::Parse(src).Render(data_["snippet_context"]);
    } catch (const Error& e) {
      error = e.what();
    }
    if (s.contains("error")) {
      EXPECT_FALSE(error.empty()) << src << ": reference raised " << s["error"] << ", we printed "
                                  << got;
    } else {
      EXPECT_EQ(error, "") << src;
      EXPECT_EQ(got, s["expected"].get<std::string>()) << src;
    }
    ++n;
  }
  EXPECT_GT(n, 40);
}

TEST_F(ReferenceTest, ConcurrentRendersAgree) {
  const auto& src = data_["templates"]["minimax"]["source"];
  ChatTemplate t = ChatTemplate::Parse(src.get<std::string>());
  std::vector<const ojson*> cases;
  for (const auto& c : data_["cases"]) {
    if (c["template"] == "minimax" && c.contains("expected")) cases.push_back(&c);
  }
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      for (int rep = 0; rep < 5; ++rep) {
        for (const ojson* c : cases) {
          std::string got =
              ApplyChatTemplate(t, (*c)["messages"], (*c)["tools"],
                                (*c)["add_generation_prompt"].get<bool>(), (*c)["extra"]);
          if (got != (*c)["expected"].get<std::string>()) ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(ModelChatConfig, ReadsTokenizerConfigVariants) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("moeserve_chat_cfg_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream(dir / "tokenizer_config.json")
        << R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>",
               "chat_template": [{"name": "tool_use", "template": "T"},
                                 {"name": "default", "template": "{{ bos_token }}D"}]})";
  }
  ModelChatConfig cfg = LoadModelChatConfig(dir.string());
  EXPECT_EQ(cfg.bos_token, "<s>");
  EXPECT_EQ(cfg.eos_token, "</s>");
  EXPECT_EQ(cfg.chat_template, "{{ bos_token }}D");
  fs::remove(dir / "tokenizer_config.json");
  std::ofstream(dir / "chat_template.jinja") << "J";
  EXPECT_EQ(LoadModelChatConfig(dir.string()).chat_template, "J");
  fs::remove_all(dir);
  EXPECT_THROW(LoadModelChatConfig(dir.string()), Error);
}

TEST(ChatTemplateFile, MiniMaxRendersInterleavedThinking) {
  // Incoming assistant messages with reasoning_content and tool calls after the last user turn
  // must keep their reasoning in the prompt (interleaved thinking).
  ChatTemplate t = ChatTemplate::Parse(
      ReadFile(std::string(MOESERVE_SOURCE_DIR) + "/tests/chat/data/minimax-m2.jinja"));
  ojson messages = ojson::parse(R"([
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": "", "reasoning_content": "Call the tool.",
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "Sunny"}])");
  std::string prompt = ApplyChatTemplate(t, messages, nullptr, true);
  EXPECT_NE(
      prompt.find("]~b]ai\n<think>\nCall the tool.\n</think>\n\n\n<minimax:tool_call>\n"
                  "<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n"
                  "<parameter name=\"days\">2</parameter>\n</invoke>\n</minimax:tool_call>\n[e~[\n"
                  "]~b]tool\n<response>Sunny</response>[e~[\n]~b]ai\n<think>\n"),
      std::string::npos)
      << prompt;
}

TEST(ChatTemplateFile, MiniMaxReplyRoundTrip) {
  // A parsed MiniMax reply, sent back by the client as an assistant message (arguments as a JSON
  // string, as OpenAI clients do), renders with its reasoning and parameters once the argument
  // strings are parsed (as vLLM does).
  ChatTemplate t = ChatTemplate::Parse(
      ReadFile(std::string(MOESERVE_SOURCE_DIR) + "/tests/chat/data/minimax-m2.jinja"));
  ParserOptions o;
  o.reasoning = ReasoningFormat::kThinkTags;
  o.tools = ToolCallFormat::kMiniMaxXml;
  o.prompt_opened_think = true;
  ParsedReply r =
      ParseReply(o,
                 "Need the tool.\n</think>\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
                 "<parameter name=\"city\">Paris</parameter>\n</invoke>\n</minimax:tool_call>");
  ojson assistant = {{"role", "assistant"},
                     {"content", r.content},
                     {"reasoning_content", r.reasoning_content},
                     {"tool_calls", ojson::array()}};
  for (const auto& c : r.tool_calls) assistant["tool_calls"].push_back(c.ToOpenAI());
  ojson messages = ojson::array({{{"role", "user"}, {"content", "Weather?"}},
                                 assistant,
                                 {{"role", "tool"}, {"content", "Sunny"}}});
  std::string raw = ApplyChatTemplate(t, messages, nullptr, true);
  EXPECT_EQ(raw.find("<parameter name=\"city\">"), std::string::npos);  // string args: dropped
  std::string prompt = ApplyChatTemplate(t, ParseToolCallArguments(messages), nullptr, true);
  EXPECT_NE(
      prompt.find("]~b]ai\n<think>\nNeed the tool.\n</think>\n\n\n<minimax:tool_call>\n"
                  "<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n"
                  "</invoke>\n</minimax:tool_call>\n[e~[\n]~b]tool\n<response>Sunny</response>"),
      std::string::npos)
      << prompt;
}

}  // namespace
}  // namespace moeserve::chat
