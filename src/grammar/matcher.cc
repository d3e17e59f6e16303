#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>

namespace moeserve::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> compiled)
    : compiled_(std::move(compiled)), parser_(compiled_->grammar()) {}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  if (terminated_) return false;
  const size_t before = parser_.num_sets();
  for (char c : bytes) {
    if (!parser_.Advance(static_cast<uint8_t>(c))) {
      parser_.Truncate(before);
      return false;
    }
  }
  step_sets_.push_back(static_cast<int64_t>(before));
  return true;
}

bool GrammarMatcher::AcceptToken(int32_t id) {
  const Vocabulary& vocab = compiled_->vocabulary();
  if (id < 0 || static_cast<size_t>(id) >= vocab.size() || terminated_) return false;
  if (vocab.is_stop(id)) {
    if (!CanTerminate()) return false;
    terminated_ = true;
    step_sets_.push_back(-1);
    return true;
  }
  if (vocab.is_special(id)) return false;
  return AcceptBytes(vocab.bytes(id));
}

void GrammarMatcher::Rollback(size_t num_steps) {
  MOESERVE_CHECK(num_steps <= step_sets_.size(), "rollback of ", num_steps, " steps, have ",
                 step_sets_.size());
  for (size_t i = 0; i < num_steps; ++i) {
    const int64_t sets = step_sets_.back();
    step_sets_.pop_back();
    if (sets < 0) {
      terminated_ = false;
    } else {
      parser_.Truncate(static_cast<size_t>(sets));
    }
  }
}

void GrammarMatcher::FillNextTokenMask(std::span<uint64_t> mask) {
  const Vocabulary& vocab = compiled_->vocabulary();
  const Grammar& g = *compiled_->grammar();
  MOESERVE_CHECK(mask.size() == BitmaskWords(vocab.size()), "mask of ", mask.size(), " words");
  std::fill(mask.begin(), mask.end(), 0);
  if (terminated_) return;

  // 1. Union of the context-independent accepted sets; collect the uncertain tokens.
  states_seen_.clear();
  uncertain_.clear();
  for (const EarleyItem& item : parser_.last_set()) {
    if (g.bytes_of(item.state).empty()) continue;
    if (std::find(states_seen_.begin(), states_seen_.end(), item.state) != states_seen_.end())
      continue;
    states_seen_.push_back(item.state);
    const StateTokenClasses& classes = compiled_->ClassesOf(item.state);
    if (!classes.accepted_bits.empty()) {
      for (size_t w = 0; w < mask.size(); ++w) mask[w] |= classes.accepted_bits[w];
    } else {
      for (int32_t id : classes.accepted_ids) BitmaskSet(mask, id);
    }
    uncertain_.insert(uncertain_.end(), classes.uncertain_ranks.begin(),
                      classes.uncertain_ranks.end());
  }
  if (states_seen_.size() > 1) {
    std::sort(uncertain_.begin(), uncertain_.end());
    uncertain_.erase(std::unique(uncertain_.begin(), uncertain_.end()), uncertain_.end());
  }

  // 2. Uncertain tokens against the real parse, in trie order, sharing prefixes.
  const size_t base = parser_.num_sets();
  const auto sorted = vocab.sorted();
  std::string_view prev;
  size_t depth = 0, dead_len = SIZE_MAX;
  for (int32_t rank : uncertain_) {
    const int32_t id = sorted[rank];
    if (BitmaskTest(mask, id)) continue;
    const std::string_view tok = vocab.sorted_bytes(static_cast<size_t>(rank));
    size_t common = 0;
    while (common < prev.size() && common < tok.size() && prev[common] == tok[common]) ++common;
    if (common >= dead_len) continue;  // shares the prefix that already failed
    dead_len = SIZE_MAX;
    if (depth > common) {
      depth = common;
      parser_.Truncate(base + depth);
    }
    while (depth < tok.size()) {
      if (!parser_.Advance(static_cast<uint8_t>(tok[depth]))) {
        dead_len = depth + 1;
        break;
      }
      ++depth;
    }
    if (dead_len == SIZE_MAX) BitmaskSet(mask, id);
    prev = tok;
  }
  parser_.Truncate(base);

  // 3. Stop tokens when the grammar can end.
  if (CanTerminate())
    for (int32_t id : vocab.stop_ids()) BitmaskSet(mask, id);
}

void GrammarMatcher::FillNextTokenMaskBruteForce(std::span<uint64_t> mask) {
  const Vocabulary& vocab = compiled_->vocabulary();
  std::fill(mask.begin(), mask.end(), 0);
  for (size_t id = 0; id < vocab.size(); ++id) {
    if (AcceptToken(static_cast<int32_t>(id))) {
      BitmaskSet(mask, static_cast<int32_t>(id));
      Rollback(1);
    }
  }
}

}  // namespace moeserve::grammar
