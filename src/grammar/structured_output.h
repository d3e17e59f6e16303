// What a caller hands the grammar layer for one request's structured output, and the cache of
// compiled grammars (the only one: the server's structured outputs use it too) so a schema is
// compiled (and its token classes computed) once, not per request. Spellings map onto a
// GrammarRequest:
//   response_format {"type":"json_schema", json_schema:{schema}}  -> kJsonSchema
//   response_format {"type":"json_object"}                         -> kJsonObject
//   structured_outputs.json / guided_json / llama.cpp json_schema  -> kJsonSchema
//   structured_outputs.regex / guided_regex                        -> kRegex
//   structured_outputs.choice / guided_choice                      -> kChoice
//   structured_outputs.grammar / guided_grammar / llama.cpp grammar -> kGbnf
// and answers a GrammarError from Get with a 400 carrying its message.
//
// Thread-safety: GrammarCache is safe from any thread; the grammars it returns are immutable
// (their token-class cache fills itself under its own lock).
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/compiled_grammar.h"

namespace moeserve::grammar {

enum class GrammarKind { kJsonSchema, kJsonObject, kRegex, kChoice, kGbnf };

struct GrammarRequest {
  GrammarKind kind = GrammarKind::kJsonObject;
  std::string text;                  // the schema (JSON text), regex or GBNF; unused otherwise
  std::vector<std::string> choices;  // kChoice
  bool compact_json = false;         // JSON: no whitespace between tokens

  // A stable key of everything above.
  std::string CacheKey() const;
};

// The grammar a request asks for. Throws GrammarError (bad schema, regex or GBNF).
GrammarAst BuildGrammar(const GrammarRequest& request);

class GrammarCache {
 public:
  // Keeps the `capacity` most recently used grammars for `vocabulary`; they share token classes
  // of equal automaton regions (compiled_grammar.h), so even a new schema starts warm. A grammar
  // holds up to ~25 KB of token classes per automaton state it has met (200k vocabulary), a few
  // MB for a typical schema: hence a modest default capacity.
  explicit GrammarCache(std::shared_ptr<const Vocabulary> vocabulary, size_t capacity = 32);

  // The compiled grammar for `request`, compiled on the first request. Throws GrammarError.
  std::shared_ptr<const CompiledGrammar> Get(const GrammarRequest& request);

  // The grammar cached under `key`, or on a miss build()'s grammar compiled for this cache's
  // vocabulary and cached under it. `key` must be canonical: equal exactly for requests that
  // build the same grammar (GrammarRequest::CacheKey; the server's ConstraintSpec::CacheKey for
  // its own kinds, such as tool calls). build() runs without the cache's lock, so two threads
  // missing the same key may both compile; the first to finish is kept. Whatever build() or the
  // compilation throws (GrammarError) reaches the caller and nothing is cached.
  std::shared_ptr<const CompiledGrammar> Get(const std::string& key,
                                             const std::function<GrammarAst()>& build);

  const std::shared_ptr<const Vocabulary>& vocabulary() const { return vocabulary_; }
  size_t capacity() const { return capacity_; }
  size_t size() const;

  struct Stats {
    size_t hits = 0, misses = 0, size = 0;
  };
  Stats stats() const;

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const CompiledGrammar>>;

  std::shared_ptr<const Vocabulary> vocabulary_;
  std::shared_ptr<TokenClassCache> token_classes_;  // shared by every grammar of the cache
  size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recent first; guarded by mu_
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;  // guarded by mu_
  size_t hits_ = 0, misses_ = 0;                                       // guarded by mu_
};

}  // namespace moeserve::grammar
