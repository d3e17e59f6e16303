// Per-sequence grammar state: the Earley parse of everything generated so far, advanced by the
// bytes of each sampled token, with the mask of allowed next tokens and rollback of the last
// tokens (the engine may discard tokens it already fed, e.g. on a stop string or a recompute).
//
// Token rules: an ordinary token is allowed when all its bytes extend a viable prefix of the
// grammar; a stop id (EOS, end of turn) exactly when the grammar can end here; every other
// special token and every empty token never.
//
// Memory: one Earley set per consumed byte, kept so tokens can be rolled back; each set holds
// at most EarleyParser::kMaxItemsPerSet items (a pathological grammar dies instead of growing).
//
// Not thread-safe: one per sequence. The CompiledGrammar is shared.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/earley.h"

namespace moeserve::grammar {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> compiled);

  // Consumes `bytes` if they extend a viable prefix; otherwise changes nothing and returns
  // false. Counts as one step for Rollback.
  bool AcceptBytes(std::string_view bytes);
  // Consumes token `id` under the token rules above; false (and no change) when not allowed.
  bool AcceptToken(int32_t id);
  // Undoes the last `num_steps` AcceptToken / AcceptBytes calls that returned true.
  void Rollback(size_t num_steps);
  size_t num_steps() const { return step_sets_.size(); }

  // The grammar can end after what was consumed.
  bool CanTerminate() const { return parser_.CanFinish(); }
  // A stop token was accepted: nothing more is allowed.
  bool IsTerminated() const { return terminated_; }
  // No further byte is allowed: the only way on is to end (or it already ended).
  bool MustTerminate() const { return terminated_ || !parser_.CanContinue(); }

  // Writes the allowed next tokens into `mask` (BitmaskWords(vocab) words).
  void FillNextTokenMask(std::span<uint64_t> mask);
  // The same without the cache: every token tried on the parse (the tests' reference).
  void FillNextTokenMaskBruteForce(std::span<uint64_t> mask);

  const CompiledGrammar& compiled() const { return *compiled_; }

 private:
  std::shared_ptr<const CompiledGrammar> compiled_;
  EarleyParser parser_;
  // Number of parser sets before each accepted step; -1 marks a stop token.
  std::vector<int64_t> step_sets_;
  bool terminated_ = false;
  // Scratch for FillNextTokenMask.
  std::vector<int32_t> states_seen_, uncertain_;
};

}  // namespace moeserve::grammar
