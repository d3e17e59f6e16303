// A grammar compiled for matching: every rule is a byte automaton (an NFA without epsilon moves)
// whose edges either consume one byte in a range or call another rule, and whose final states end
// the rule. All rules' states live in one array so a parser item is (state, origin). Repetitions
// become loops inside a rule, not recursion, so x* costs nothing extra to parse; recursion (left
// or right) stays recursion, which the Earley parser handles.
//
// Compilation also prunes what can never finish: a rule that derives no finite string is dropped
// with every edge into it, and so is every state from which its rule cannot end. After that, any
// state the parser reaches can still be completed, which is what lets a non-empty parser set
// mean "this prefix is viable" (the mask relies on it).
//
// Immutable after Compile; safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "grammar/ast.h"

namespace moeserve::grammar {

struct ByteEdge {
  uint8_t lo = 0, hi = 0;  // inclusive byte range
  int32_t target = -1;
};

struct CallEdge {
  int32_t rule = -1;    // the rule to match here
  int32_t target = -1;  // where this rule continues once the callee has ended
};

struct FsmState {
  uint32_t byte_begin = 0, byte_end = 0;  // into Grammar::byte_edges
  uint32_t call_begin = 0, call_end = 0;  // into Grammar::call_edges
  int32_t rule = -1;
  bool final = false;  // the rule may end here
};

// Limits that keep a hostile grammar from taking the server's memory.
inline constexpr size_t kMaxGrammarStates = 1'000'000;

class Grammar {
 public:
  // Throws GrammarError when the root rule can derive no finite string or the automata would
  // exceed kMaxGrammarStates.
  static std::shared_ptr<const Grammar> Compile(const GrammarAst& ast);

  std::span<const ByteEdge> bytes_of(int32_t state) const {
    const FsmState& s = states_[state];
    return {byte_edges_.data() + s.byte_begin, s.byte_end - s.byte_begin};
  }
  std::span<const CallEdge> calls_of(int32_t state) const {
    const FsmState& s = states_[state];
    return {call_edges_.data() + s.call_begin, s.call_end - s.call_begin};
  }
  const FsmState& state(int32_t id) const { return states_[id]; }
  size_t num_states() const { return states_.size(); }
  size_t num_rules() const { return rule_start_.size(); }
  int32_t rule_start(int32_t rule) const { return rule_start_[rule]; }
  bool rule_nullable(int32_t rule) const { return rule_nullable_[rule]; }
  const std::string& rule_name(int32_t rule) const { return rule_names_[rule]; }
  int32_t root() const { return root_; }

 private:
  friend class GrammarCompiler;
  std::vector<FsmState> states_;
  std::vector<ByteEdge> byte_edges_;
  std::vector<CallEdge> call_edges_;
  std::vector<int32_t> rule_start_;
  std::vector<bool> rule_nullable_;
  std::vector<std::string> rule_names_;
  int32_t root_ = -1;
};

// The same grammar with references to small non-recursive rules replaced by the rules' bodies
// (Compile does it; see inline_rules.cc for why).
GrammarAst InlineSmallRules(const GrammarAst& ast);

// The UTF-8 encodings of the code points in [lo, hi] (surrogates excluded) as sequences of byte
// ranges: every sequence is 1-4 ranges, one per byte, and a byte string is the encoding of a code
// point in [lo, hi] exactly when it matches one sequence.
std::vector<std::vector<std::pair<uint8_t, uint8_t>>> Utf8RangeSequences(uint32_t lo, uint32_t hi);

}  // namespace moeserve::grammar
