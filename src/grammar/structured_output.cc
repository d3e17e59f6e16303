#include "grammar/structured_output.h"

#include <algorithm>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace moeserve::grammar {

std::string GrammarRequest::CacheKey() const {
  // Lengths prefix every part, so no two requests share a key.
  std::string key = std::to_string(static_cast<int>(kind)) + (compact_json ? "c" : "w");
  key += std::to_string(text.size()) + ":" + text;
  for (const std::string& c : choices) key += std::to_string(c.size()) + ":" + c;
  return key;
}

GrammarAst BuildGrammar(const GrammarRequest& request) {
  const JsonSchemaOptions json{.compact = request.compact_json};
  switch (request.kind) {
    case GrammarKind::kJsonSchema:
      return JsonSchemaToGrammar(request.text, json);
    case GrammarKind::kJsonObject:
      return JsonObjectGrammar(json);
    case GrammarKind::kRegex:
      return RegexToGrammar(request.text);
    case GrammarKind::kChoice:
      return ChoiceToGrammar(request.choices);
    case GrammarKind::kGbnf:
      return ParseGbnf(request.text);
  }
  throw GrammarError("unknown grammar kind");
}

GrammarCache::GrammarCache(std::shared_ptr<const Vocabulary> vocabulary, size_t capacity)
    : vocabulary_(std::move(vocabulary)),
      token_classes_(std::make_shared<TokenClassCache>()),
      capacity_(std::max<size_t>(capacity, 1)) {}

std::shared_ptr<const CompiledGrammar> GrammarCache::Get(const GrammarRequest& request) {
  return Get(request.CacheKey(), [&] { return BuildGrammar(request); });
}

std::shared_ptr<const CompiledGrammar> GrammarCache::Get(const std::string& key,
                                                         const std::function<GrammarAst()>& build) {
  {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return it->second->second;
    }
    ++misses_;
  }
  // Compile outside the lock: another thread may compile the same grammar meanwhile; the first
  // to insert wins and both results are equivalent.
  auto compiled = CompileForVocabulary(build(), vocabulary_, token_classes_);
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) return it->second->second;
  lru_.emplace_front(key, compiled);
  index_[key] = lru_.begin();
  if (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return compiled;
}

GrammarCache::Stats GrammarCache::stats() const {
  std::lock_guard lock(mu_);
  return {.hits = hits_, .misses = misses_, .size = lru_.size()};
}

size_t GrammarCache::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

}  // namespace moeserve::grammar
