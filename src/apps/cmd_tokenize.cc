// `moeserve tokenize` and `moeserve detokenize`: run a tokenizer.json from the command line.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "apps/command_registry.h"
#include "core/check.h"
#include "tokenizer/tokenizer.h"

namespace moeserve::apps {
namespace {

// PATH is a model folder (tokenizer.json + tokenizer_config.json) or a tokenizer.json file, in
// which case a tokenizer_config.json beside it is used too.
tokenizer::Tokenizer LoadTokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) return tokenizer::Tokenizer::FromModelDir(path);
  fs::path config = fs::path(path).parent_path() / "tokenizer_config.json";
  return tokenizer::Tokenizer::FromFile(path, fs::exists(config) ? config.string() : "");
}

struct TokenizeOptions {
  std::string tokenizer;
  std::string text;
  std::string file;
  bool no_special = false;
};

CommandRegistration tokenize_reg{
    "tokenize", "Print the token ids of a text as a JSON array", [](CLI::App& sub) {
      auto opts = std::make_shared<TokenizeOptions>();
      sub.add_option("--tokenizer", opts->tokenizer, "tokenizer.json or model folder")->required();
      auto* text = sub.add_option("--text", opts->text, "text to tokenize");
      auto* file = sub.add_option("--file", opts->file, "file whose contents to tokenize");
      text->excludes(file);
      sub.add_flag("--no-special", opts->no_special, "do not add BOS/EOS (post-processor)");
      return CommandAction([opts, text, file]() {
        if (text->count() == 0 && file->count() == 0) Fail("tokenize: give --text or --file");
        std::string input = opts->text;
        if (file->count() > 0) {
          std::ifstream in(opts->file, std::ios::binary);
          if (!in) Fail("tokenize: cannot read '", opts->file, "'");
          std::stringstream buffer;
          buffer << in.rdbuf();
          input = buffer.str();
        }
        tokenizer::Tokenizer tok = LoadTokenizer(opts->tokenizer);
        std::vector<int32_t> ids = tok.Encode(input, !opts->no_special);
        std::cout << nlohmann::json(ids).dump() << "\n";
        return 0;
      });
    }};

struct DetokenizeOptions {
  std::string tokenizer;
  std::string ids;
  bool skip_special = false;
};

std::vector<int32_t> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t b = item.find_first_not_of(" []\t\n");
    size_t e = item.find_last_not_of(" []\t\n");
    if (b == std::string::npos) continue;
    item = item.substr(b, e - b + 1);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 0 || v > INT32_MAX) Fail("detokenize: bad id '", item, "'");
    ids.push_back(int32_t(v));
  }
  return ids;
}

CommandRegistration detokenize_reg{
    "detokenize", "Print the text of comma-separated token ids", [](CLI::App& sub) {
      auto opts = std::make_shared<DetokenizeOptions>();
      sub.add_option("--tokenizer", opts->tokenizer, "tokenizer.json or model folder")->required();
      sub.add_option("--ids", opts->ids, "ids, e.g. 1,2,3 (a JSON array works too)")->required();
      sub.add_flag("--skip-special", opts->skip_special, "leave out special tokens");
      return CommandAction([opts]() {
        tokenizer::Tokenizer tok = LoadTokenizer(opts->tokenizer);
        std::vector<int32_t> ids = ParseIds(opts->ids);
        std::cout << tok.Decode(ids, opts->skip_special) << "\n";
        return 0;
      });
    }};

}  // namespace
}  // namespace moeserve::apps
