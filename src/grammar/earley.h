// An Earley recognizer over a compiled Grammar, one set per consumed byte. An item is (automaton
// state, origin): the rule of `state` started at set `origin`. Sets live in one flat array, so
// consuming a byte appends a set and undoing bytes truncates: the mask computation walks the
// vocabulary trie depth first by pushing and popping bytes, and the matcher rolls tokens back the
// same way. Left recursion, ambiguity and nullable rules are handled (Aycock-Horspool for
// nullable callees); a set is bounded by kMaxItemsPerSet items, which turns pathological grammars
// into a dead parse instead of unbounded memory.
//
// An item may have origin kContext: "started somewhere outside this parse". The token-mask cache
// starts a parse from one such item to see what a token does inside that item's rule; when that
// item's rule ends, the parse records an exit at that set instead of completing a caller.
//
// Not thread-safe; cheap to copy (the grammar is shared).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "grammar/grammar.h"

namespace moeserve::grammar {

struct EarleyItem {
  int32_t state = -1;
  uint32_t origin = 0;
};

class EarleyParser {
 public:
  static constexpr uint32_t kContext = UINT32_MAX;
  static constexpr size_t kMaxItemsPerSet = 20000;

  explicit EarleyParser(std::shared_ptr<const Grammar> grammar);

  // Drops everything; set 0 becomes the closure of {(state, origin)}.
  void Reset(int32_t state, uint32_t origin);
  // Starts matching the root rule.
  void ResetToRoot() { Reset(grammar_->rule_start(grammar_->root()), 0); }

  // Consumes one byte: appends the next set and returns true, or returns false and changes
  // nothing when no item survives (or the set would exceed kMaxItemsPerSet: see overflowed()).
  bool Advance(uint8_t byte);
  // Keeps the first `num_sets` sets (>= 1).
  void Truncate(size_t num_sets);

  size_t num_sets() const { return set_begin_.size(); }
  std::span<const EarleyItem> set(size_t i) const {
    const size_t end = i + 1 < set_begin_.size() ? set_begin_[i + 1] : items_.size();
    return {items_.data() + set_begin_[i], end - set_begin_[i]};
  }
  std::span<const EarleyItem> last_set() const { return set(num_sets() - 1); }
  // An item with origin kContext reached its rule's end in set i.
  bool exited(size_t i) const { return exited_[i]; }
  // The root rule, started at set 0, can end at the last set.
  bool CanFinish() const;
  // Some item of the last set can consume a byte.
  bool CanContinue() const;
  bool overflowed() const { return overflowed_; }
  const Grammar& grammar() const { return *grammar_; }

 private:
  // Adds (state, origin) to the set being built unless it is there already.
  void Add(int32_t state, uint32_t origin);
  // Predictions and completions for the set that starts at set_begin_.back().
  void Close();

  std::shared_ptr<const Grammar> grammar_;
  std::vector<EarleyItem> items_;
  std::vector<uint32_t> set_begin_;
  std::vector<bool> exited_;
  // stamp_[state] == generation_: `state` already occurs in the set being built (with some
  // origin); lets Add skip the duplicate search in the common case.
  std::vector<uint32_t> stamp_;
  uint32_t generation_ = 0;
  bool overflowed_ = false;
};

}  // namespace moeserve::grammar
