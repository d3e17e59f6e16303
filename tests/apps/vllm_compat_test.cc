// vLLM's command-line spellings: underscores in any flag name, its single-dash long names, its
// human-readable integers, and the ignore / refuse table.
#include "apps/vllm_compat.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/check.h"

namespace moeserve::apps {
namespace {

TEST(VllmArgs, UnderscoresBecomeDashesInNamesOnly) {
  std::vector<std::string> args = {"serve",    "--max_model_len",
                                   "32_000",   "--kv_cache_dtype=fp8",
                                   "-tp",      "2",
                                   "-pp=1",    "--served-model-name",
                                   "my_model", "-q",
                                   "fp8"};
  NormalizeVllmArgs(args);
  EXPECT_EQ(args,
            (std::vector<std::string>{"serve", "--max-model-len", "32_000", "--kv-cache-dtype=fp8",
                                      "--tensor-parallel-size", "2", "--pipeline-parallel-size=1",
                                      "--served-model-name", "my_model", "--quantization", "fp8"}));
}

TEST(VllmArgs, HumanReadableIntsAsVllm) {
  EXPECT_EQ(ParseHumanReadableInt("4096"), 4096u);
  EXPECT_EQ(ParseHumanReadableInt("32k"), 32000u);
  EXPECT_EQ(ParseHumanReadableInt("32K"), 32768u);
  EXPECT_EQ(ParseHumanReadableInt("25.6k"), 25600u);
  EXPECT_EQ(ParseHumanReadableInt("1m"), 1000000u);
  EXPECT_EQ(ParseHumanReadableInt("1M"), 1u << 20);
  EXPECT_EQ(ParseHumanReadableInt("2G"), 2ull << 30);
  EXPECT_EQ(ParseHumanReadableInt(" 8g "), 8000000000ull);
  for (const char* bad :
       {"", "k", "1.5K", "1x", "-1", "1..2k", ".5k", "1e3", "99999999999999999999"})
    EXPECT_THROW(ParseHumanReadableInt(bad), Error) << bad;
}

TEST(VllmArgs, TransformRewritesValues) {
  CLI::App app;
  size_t len = 0;
  app.add_option("--max-model-len", len)->transform(HumanReadableInt(true));
  app.parse(std::vector<std::string>{"2K", "--max-model-len"});  // CLI11 takes them reversed
  EXPECT_EQ(len, 2048u);
  app.parse(std::vector<std::string>{"auto", "--max-model-len"});
  EXPECT_EQ(len, 0u);
  EXPECT_THROW(app.parse(std::vector<std::string>{"1.5K", "--max-model-len"}), CLI::ParseError);
}

TEST(VllmFlags, IgnoredWarnRefusedThrow) {
  auto parse = [](std::vector<std::string> args) {
    auto app = std::make_unique<CLI::App>();
    auto flags = std::make_unique<VllmFlagSet>();
    flags->AddTo(*app);
    std::reverse(args.begin(), args.end());
    app->parse(args);
    return std::make_pair(std::move(app), std::move(flags));
  };
  {
    auto [app, flags] = parse({"--dtype", "auto", "--trust-remote-code", "--tokenizer", "/m/x/"});
    const std::string line = flags->Check("/m/x");
    EXPECT_NE(line.find("--dtype auto"), std::string::npos) << line;
    EXPECT_NE(line.find("--trust-remote-code"), std::string::npos) << line;
    EXPECT_NE(line.find("--tokenizer /m/x/"), std::string::npos) << line;
  }
  {
    auto [app, flags] = parse({});
    EXPECT_EQ(flags->Check("/m/x"), "");
  }
  for (auto args : std::vector<std::vector<std::string>>{{"--dtype", "float16"},
                                                         {"--tokenizer", "/other"},
                                                         {"--enable-lora"},
                                                         {"--quantization", "awq"},
                                                         {"--pipeline-parallel-size", "2"}}) {
    auto [app, flags] = parse(args);
    EXPECT_THROW(flags->Check("/m/x"), Error) << args[0];
  }
}

TEST(VllmFlags, ChatTemplateInlineOrFile) {
  EXPECT_EQ(ResolveChatTemplate("{{ messages }}"), "{{ messages }}");
  EXPECT_EQ(ResolveChatTemplate("line\nline"), "line\nline");
  EXPECT_THROW(ResolveChatTemplate("/no/such/file.jinja"), Error);
}

}  // namespace
}  // namespace moeserve::apps

namespace moeserve::apps {
namespace {

// README's table of vLLM flags is written from VllmFlags(); a flag added to one and not the other
// fails here.
TEST(VllmFlags, ReadmeNamesEveryFlag) {
  std::ifstream f(std::string(MOESERVE_SOURCE_DIR) + "/README.md");
  std::stringstream readme;
  readme << f.rdbuf();
  for (const VllmFlag& flag : VllmFlags())
    EXPECT_NE(readme.str().find("`" + flag.name), std::string::npos) << flag.name;
}

}  // namespace
}  // namespace moeserve::apps
