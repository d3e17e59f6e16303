// Structured outputs on the request side (issue 12): every spelling a client may use for a
// constraint is read into one typed ConstraintSpec, which is compiled into a grammar bound to the
// model's vocabulary and cached per canonical spec, ready for SamplingParams::grammar.
//
// Accepted spellings (one constraint per request; two of them -> 400):
//   OpenAI     response_format {"type": "text"} (no constraint), {"type": "json_object"},
//              {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}
//   vLLM       structured_outputs {json | regex | choice | grammar | json_object}, with
//              disable_any_whitespace; the older guided_json, guided_regex, guided_choice,
//              guided_grammar
//   llama.cpp  grammar (GBNF), json_schema, response_format {"type": "json_object", "schema"}
// Tool calls (tool_call_grammar.h) are one more kind, built by the chat route from tool_choice.
//
// What is refused with a 400 (never a 200 that ignores it): an unknown response_format type, a
// JSON Schema keyword the grammar front end does not support (its message names the keyword and
// its path), malformed GBNF or regex, an empty choice list, vLLM's structural_tag and
// whitespace patterns.
//
// Reasoning: with a reasoning parser active and a prompt that opened `<think>`, the constraint
// starts after `</think>` (SamplingParams::grammar_start_after), as vLLM's structured outputs
// do: the model thinks freely, then answers under the grammar.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/reply_parser.h"
#include "grammar/compiled_grammar.h"
#include "grammar/structured_output.h"
#include "grammar/vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace moeserve::engine {
struct SamplingParams;
}

namespace moeserve::server {

using Json = nlohmann::ordered_json;

struct ConstraintSpec {
  enum class Kind { kNone, kJsonSchema, kJsonObject, kRegex, kChoice, kGrammar, kToolCalls };
  Kind kind = Kind::kNone;
  Json schema;                       // kJsonSchema: the schema (object or boolean)
  std::string text;                  // kRegex: the pattern; kGrammar: GBNF text
  std::vector<std::string> choices;  // kChoice
  bool compact = false;              // JSON kinds: no whitespace between tokens
  // kToolCalls (tool_call_grammar.h): the request's tools, the model's call syntax, the one
  // function a named tool_choice allows ("" = any), and whether exactly one call is allowed.
  Json tools;
  chat::ToolCallFormat tool_format = chat::ToolCallFormat::kNone;
  std::string only_function;
  bool single_call = false;
  std::string field;  // the request field it came from (the `param` of a 400)

  bool empty() const { return kind == Kind::kNone; }
  // The same key for specs that compile to the same grammar.
  std::string CacheKey() const;
};

// Reads the constraint fields of a chat or completions body (see the list above). Throws
// BadRequest naming the field for a malformed value, an unknown response_format type or two
// constraints in one request. Does not compile anything.
ConstraintSpec ParseConstraint(const Json& body);

// The body fields ParseConstraint reads (for LogIgnoredFields).
extern const std::initializer_list<std::string_view> kConstraintFields;

// The model's tokens as grammars see them, and the compiled grammars of recent specs: one
// grammar::GrammarCache (grammar/structured_output.h) per vocabulary, keyed by
// ConstraintSpec::CacheKey. Thread-safe: HTTP threads compile concurrently; the vocabularies and
// their caches are built once, on first use.
class StructuredOutputs {
 public:
  // `eos_token`: an end-of-turn token text besides the tokenizer's EOS ("" if none); either ends
  // a constrained generation when the grammar accepts. `cache_capacity`: the grammars kept per
  // vocabulary (the least recently used go first).
  explicit StructuredOutputs(const tokenizer::Tokenizer& tokenizer, std::string eos_token = "",
                             size_t cache_capacity = kDefaultCacheCapacity);

  // The compiled grammar of `spec` (from the cache when it was compiled before). Throws
  // BadRequest (400, param spec.field) when the spec cannot be compiled.
  std::shared_ptr<const grammar::CompiledGrammar> Compile(const ConstraintSpec& spec);

  // The model's vocabulary: every id's bytes, special tokens flagged, EOS as stop id. Tool-call
  // grammars use a second one in which the reply parsers' tags (<think>, <minimax:tool_call>,
  // <tool_call>, ...) are ordinary tokens, since the call syntax is written with them.
  std::shared_ptr<const grammar::Vocabulary> vocabulary(bool tags_ordinary = false);

  struct CacheStats {
    size_t hits = 0, misses = 0, size = 0;
  };
  CacheStats cache_stats() const;

  static constexpr size_t kDefaultCacheCapacity = 64;

 private:
  std::shared_ptr<const grammar::Vocabulary> BuildVocabulary(bool tags_ordinary) const;
  // The cache of the plain or the tags-ordinary vocabulary, made with it on first use.
  grammar::GrammarCache& cache(bool tags_ordinary);

  const tokenizer::Tokenizer& tokenizer_;
  std::string eos_token_;
  const size_t capacity_;
  mutable std::mutex mu_;
  // Created under mu_ on first use, never replaced: a reference to one stays valid.
  std::unique_ptr<grammar::GrammarCache> cache_, cache_tags_ordinary_;
};

// Compiles `spec` (when not empty) into params.grammar. `reasoning_opened` says the prompt left a
// reasoning block open: the grammar then starts after "</think>".
void ApplyConstraint(const ConstraintSpec& spec, bool reasoning_opened, StructuredOutputs& outputs,
                     engine::SamplingParams& params);

}  // namespace moeserve::server
