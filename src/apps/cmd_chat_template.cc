// `moeserve chat-template`: print the prompt a model's chat template renders for a chat request.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "apps/command_registry.h"
#include "chat/chat_template.h"
#include "core/check.h"

namespace moeserve::apps {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("cannot read ", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct ChatTemplateOptions {
  std::string model_dir;
  std::string messages_path;
  std::string template_path;
  bool add_generation_prompt = false;
};

int RunChatTemplate(const ChatTemplateOptions& o) {
  chat::ModelChatConfig cfg;
  if (!o.model_dir.empty()) {
    if (o.template_path.empty()) {
      cfg = chat::LoadModelChatConfig(o.model_dir);
    } else {
      try {
        cfg = chat::LoadModelChatConfig(o.model_dir);
      } catch (const Error&) {
        // --chat-template replaces a missing template; the special tokens stay empty then.
      }
    }
  }
  if (!o.template_path.empty()) cfg.chat_template = ReadText(o.template_path);
  if (cfg.chat_template.empty()) Fail("no chat template: pass --model DIR or --chat-template FILE");

  nlohmann::ordered_json request;
  try {
    request = nlohmann::ordered_json::parse(ReadText(o.messages_path));
  } catch (const nlohmann::json::exception& e) {
    Fail(o.messages_path, ": ", e.what());
  }
  if (!request.is_object() || !request.contains("messages")) {
    Fail(o.messages_path, ": expected a chat request body with \"messages\"");
  }
  nlohmann::ordered_json tools =
      request.contains("tools") ? request["tools"] : nlohmann::ordered_json();
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  extra["bos_token"] = cfg.bos_token;
  extra["eos_token"] = cfg.eos_token;
  // vLLM passes chat_template_kwargs (e.g. enable_thinking) through to the template.
  if (request.contains("chat_template_kwargs") && request["chat_template_kwargs"].is_object()) {
    for (auto it = request["chat_template_kwargs"].begin();
         it != request["chat_template_kwargs"].end(); ++it) {
      extra[it.key()] = it.value();
    }
  }
  chat::ChatTemplate tmpl = chat::ChatTemplate::Parse(cfg.chat_template);
  std::string prompt =
      chat::ApplyChatTemplate(tmpl, request["messages"], tools, o.add_generation_prompt, extra);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  return 0;
}

CommandRegistration reg{
    "chat-template", "Render a chat request through a model's chat template and print the prompt",
    [](CLI::App& sub) -> CommandAction {
      auto o = std::make_shared<ChatTemplateOptions>();
      sub.add_option("--model", o->model_dir,
                     "Model directory (tokenizer_config.json or chat_template.jinja)");
      sub.add_option("--messages", o->messages_path,
                     "JSON file with an OpenAI chat request body (messages, optional tools)")
          ->required();
      sub.add_flag("--add-generation-prompt", o->add_generation_prompt,
                   "Open the assistant turn at the end of the prompt");
      sub.add_option("--chat-template", o->template_path,
                     "Jinja template file (overrides the model's)");
      return [o] { return RunChatTemplate(*o); };
    }};

}  // namespace
}  // namespace moeserve::apps
