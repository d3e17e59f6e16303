// Chat-template rendering: a Jinja interpreter for the chat templates shipped with models
// (tokenizer_config.json `chat_template`), byte-compatible with @huggingface/jinja, the renderer
// behind transformers.js; the same statements, filters and tests as HF's apply_chat_template
// environment (trim_blocks and lstrip_blocks on).
//
//   ChatTemplate t = ChatTemplate::Parse(source);                 // throws moeserve::Error
//   std::string prompt = ApplyChatTemplate(t, messages, tools, /*add_generation_prompt=*/true,
//                                          {{"bos_token", "<s>"}});
//
// Thread safety: a parsed ChatTemplate is immutable; Render is const and may run concurrently.
// Errors: syntax and runtime errors (including raise_exception() in the template) throw
// moeserve::Error whose message starts with "chat template line N:".
// Limits: each render is bounded (1e6 loop iterations, 100 nested macro calls, 64 MiB per string,
// 1e6 list items, a work budget), so a hostile template fails with an error instead of hanging.
//
// Key order: inputs are nlohmann::ordered_json so `tojson` prints tool schemas in the order the
// client sent them (as Python's json.dumps and HF do). The nlohmann::json overloads work too but
// nlohmann::json itself sorts object keys.
//
// Where @huggingface/jinja and Python Jinja2 disagree, this follows @huggingface/jinja:
//  - `{{ none }}` and `{{ undefined }}` print nothing; booleans print "true"/"false"; lists and
//    dicts print as JSON (`["a", 1]`); floats with integral values print "1.0" but numbers that
//    came from JSON input are integers when integral (JavaScript has one number type).
//  - str.strip/lstrip/rstrip ignore their `chars` argument and strip all whitespace.
//  - `x.attr` on undefined/none yields undefined instead of raising.
//  - `==` is JavaScript loose equality (`1 == "1"`, `none == undefined`); `in` is strict.
//  - capitalize/title do not lower-case the rest of the word; upper/lower/title are ASCII-only.
//  - `length` of a string counts UTF-16 code units; indexing/slicing count code points.
//  - tojson: indent=0 means single-line; sort_keys compares bytes; integer-like object keys keep
//    their order (JavaScript would move them first).
// Beyond @huggingface/jinja (Python Jinja2 behaviour): {% raw %}, loop.cycle, string comparisons,
// iterating strings, tests with arguments (divisibleby, equalto, ...), filters d, count, escape,
// round, min, max, sum, wordcount, batch, select/reject, map(filter), list/first/last/reverse on
// strings, str.find/rfind/count/rsplit/join, list.append/pop, dict(), trim(chars).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace moeserve::chat {

namespace jinja {
struct Program;
}

class ChatTemplate {
 public:
  static ChatTemplate Parse(std::string source);

  // `context` must be an object; its keys become template variables.
  std::string Render(const nlohmann::ordered_json& context) const;
  std::string Render(const nlohmann::json& context) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::shared_ptr<const jinja::Program> program_;
};

// HF apply_chat_template's context: messages, tools (null when absent), add_generation_prompt,
// then every key of `extra` (bos_token, eos_token, enable_thinking, ...).
std::string ApplyChatTemplate(
    const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
    const nlohmann::ordered_json& tools, bool add_generation_prompt,
    const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());

// Returns `messages` with every assistant tool_calls[].function.arguments that is a JSON string
// parsed into an object (strings that are not valid JSON stay as they are). vLLM does this before
// rendering, and the MiniMax-M2 template needs it: it prints <parameter> lines only when
// `arguments is mapping`, so a string would render an invoke without its parameters.
nlohmann::ordered_json ParseToolCallArguments(const nlohmann::ordered_json& messages);

// Chat template and special tokens of a Hugging Face model directory: tokenizer_config.json
// `chat_template` (a string, or a list of {name, template} where "default" is taken), else
// chat_template.jinja; bos/eos tokens as strings or {content: ...}. Throws moeserve::Error.
struct ModelChatConfig {
  std::string chat_template;
  std::string bos_token;
  std::string eos_token;
};
ModelChatConfig LoadModelChatConfig(const std::string& model_dir);

}  // namespace moeserve::chat
