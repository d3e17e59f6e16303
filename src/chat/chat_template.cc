#include "chat/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat/jinja/ast.h"
#include "chat/jinja/error.h"
#include "chat/jinja/interpreter.h"
#include "core/check.h"
#include "core/json_depth.h"

namespace moeserve::chat {

ChatTemplate ChatTemplate::Parse(std::string source) {
  ChatTemplate t;
  t.program_ = jinja::ParseTemplate(source);
  t.source_ = std::move(source);
  return t;
}

std::string ChatTemplate::Render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) Fail("chat template context must be a JSON object");
  jinja::Interpreter interpreter{jinja::Limits{}};
  return interpreter.Run(*program_, jinja::FromJson(context));
}

std::string ChatTemplate::Render(const nlohmann::json& context) const {
  if (!context.is_object()) Fail("chat template context must be a JSON object");
  jinja::Interpreter interpreter{jinja::Limits{}};
  return interpreter.Run(*program_, jinja::FromJson(context));
}

std::string ApplyChatTemplate(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                              const nlohmann::ordered_json& tools, bool add_generation_prompt,
                              const nlohmann::ordered_json& extra) {
  if (!messages.is_array()) Fail("messages must be a JSON array");
  if (!tools.is_null() && !tools.is_array()) Fail("tools must be null or a JSON array");
  if (!extra.is_object()) Fail("extra template arguments must be a JSON object");
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = messages;
  context["tools"] = tools;
  context["add_generation_prompt"] = add_generation_prompt;
  for (auto it = extra.begin(); it != extra.end(); ++it) context[it.key()] = it.value();
  return tmpl.Render(context);
}

nlohmann::ordered_json ParseToolCallArguments(const nlohmann::ordered_json& messages) {
  nlohmann::ordered_json out = messages;
  if (!out.is_array()) return out;
  for (auto& m : out) {
    if (!m.is_object() || !m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (auto& call : m["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
        continue;
      auto& fn = call["function"];
      if (!fn.contains("arguments") || !fn["arguments"].is_string()) continue;
      const std::string& text = fn["arguments"].get_ref<const std::string&>();
      // Deeper than any real arguments object: kept as the string the client sent.
      if (JsonNestingDepth(text) > kMaxJsonDepth) continue;
      auto parsed = nlohmann::ordered_json::parse(text, nullptr, false);
      if (!parsed.is_discarded()) fn["arguments"] = std::move(parsed);
    }
  }
  return out;
}

namespace {

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("cannot read ", path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TokenString(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return "";
}

}  // namespace

ModelChatConfig LoadModelChatConfig(const std::string& model_dir) {
  namespace fs = std::filesystem;
  ModelChatConfig cfg;
  fs::path dir(model_dir);
  fs::path config_path = dir / "tokenizer_config.json";
  if (fs::exists(config_path)) {
    nlohmann::ordered_json config;
    try {
      config = nlohmann::ordered_json::parse(ReadFile(config_path));
    } catch (const nlohmann::json::exception& e) {
      Fail(config_path.string(), ": ", e.what());
    }
    if (config.contains("bos_token")) cfg.bos_token = TokenString(config["bos_token"]);
    if (config.contains("eos_token")) cfg.eos_token = TokenString(config["eos_token"]);
    if (config.contains("chat_template")) {
      const auto& ct = config["chat_template"];
      if (ct.is_string()) {
        cfg.chat_template = ct.get<std::string>();
      } else if (ct.is_array()) {
        for (const auto& entry : ct) {
          if (entry.is_object() && entry.value("name", "") == "default" &&
              entry.contains("template") && entry["template"].is_string()) {
            cfg.chat_template = entry["template"].get<std::string>();
          }
        }
        if (cfg.chat_template.empty()) Fail(config_path.string(), ": no \"default\" chat template");
      }
    }
  }
  if (cfg.chat_template.empty() && fs::exists(dir / "chat_template.jinja")) {
    cfg.chat_template = ReadFile(dir / "chat_template.jinja");
  }
  if (cfg.chat_template.empty()) {
    Fail(model_dir,
         ": no chat template (tokenizer_config.json chat_template or chat_template.jinja)");
  }
  return cfg;
}

}  // namespace moeserve::chat
