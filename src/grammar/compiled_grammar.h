// A grammar bound to a vocabulary, with the per-state token cache that makes masks cheap
// (xgrammar's adaptive token mask cache, applied to Earley items).
//
// For an automaton state s, every ordinary token falls in one of three classes, whatever the
// rest of the parse (the "context") looks like:
//   accepted:  its bytes can be consumed entirely inside s's rule (including rules it calls):
//              valid in every context where an item at s is alive;
//   rejected:  its bytes fail inside the rule before the rule could have ended, so no context
//              can rescue it;
//   uncertain: the rule can end partway through the token; whether the rest fits depends on
//              the callers, so it is checked against the real parse at mask time.
// An ending of the rule before the token's first byte is not counted: the real parse set
// already holds the callers' continuation items, whose own classes cover those tokens.
//
// The mask of a parse is then the union of the accepted sets of the last set's items, plus the
// uncertain tokens that pass a check on the real parse (walked in trie order so they share
// prefixes). Classes are computed on first use of a state and kept for the grammar's lifetime;
// a grammar compiled once per schema serves every request with that schema.
//
// Thread-safety: all methods are safe from any thread (the cache is filled under a mutex).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/vocabulary.h"

namespace moeserve::grammar {

struct StateTokenClasses {
  // Accepted tokens: a bitmask over ids when many, else their ids.
  TokenBitmask accepted_bits;
  std::vector<int32_t> accepted_ids;
  std::vector<int32_t> uncertain_ranks;  // Vocabulary ranks, ascending (trie order)
};

// Token classes shared by the grammars of one vocabulary, keyed by the exact shape of a region
// of the automaton that calls no rule (states, byte edges, final flags, as reached from the
// classified state). "The contents of a JSON string, then the rule ends" has the same shape in
// every property of every schema, so a new schema reuses what earlier ones computed.
// Thread-safe.
class TokenClassCache {
 public:
  explicit TokenClassCache(size_t max_entries = 4096) : max_entries_(max_entries) {}
  std::shared_ptr<const StateTokenClasses> Find(const std::string& shape) const;
  // Keeps the first max_entries shapes; later ones are not kept.
  void Insert(const std::string& shape, std::shared_ptr<const StateTokenClasses> classes);
  size_t size() const;

 private:
  size_t max_entries_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const StateTokenClasses>> by_shape_;
};

class CompiledGrammar {
 public:
  // `shared`: token classes shared with other grammars of the same vocabulary (optional).
  CompiledGrammar(std::shared_ptr<const Grammar> grammar,
                  std::shared_ptr<const Vocabulary> vocabulary,
                  std::shared_ptr<TokenClassCache> shared = nullptr);

  const std::shared_ptr<const Grammar>& grammar() const { return grammar_; }
  const Vocabulary& vocabulary() const { return *vocabulary_; }

  // The classes of `state` (a state with byte edges), computed on first use.
  const StateTokenClasses& ClassesOf(int32_t state) const;
  // Computes the classes of every state now (a server may do it off the engine thread).
  void PrecomputeAll() const;
  // How many states have their classes computed (for tests and the benchmark).
  size_t num_cached_states() const;

 private:
  std::shared_ptr<const StateTokenClasses> Classify(int32_t state) const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const Vocabulary> vocabulary_;
  std::shared_ptr<TokenClassCache> shared_;
  mutable std::mutex mu_;
  mutable std::vector<std::shared_ptr<const StateTokenClasses>> classes_;  // by state; mu_
};

// Convenience: a compiled grammar from an AST and a vocabulary.
std::shared_ptr<const CompiledGrammar> CompileForVocabulary(
    const GrammarAst& ast, std::shared_ptr<const Vocabulary> vocabulary,
    std::shared_ptr<TokenClassCache> shared = nullptr);

}  // namespace moeserve::grammar
