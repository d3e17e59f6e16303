// Compilation: a Thompson NFA per rule (with epsilon moves), epsilon elimination into one global
// state array, then the analyses the parser relies on (nullable rules, productive rules, states
// that can still reach their rule's end) and pruning of everything that can never finish.
#include "grammar/grammar.h"

#include <algorithm>
#include <tuple>

namespace moeserve::grammar {
namespace {

struct NfaState {
  std::vector<ByteEdge> bytes;
  std::vector<CallEdge> calls;
  std::vector<int32_t> eps;
};

class RuleNfa {
 public:
  RuleNfa(size_t& total_states) : total_(total_states) {}

  int32_t New() {
    if (++total_ > kMaxGrammarStates)
      throw GrammarError(detail::Concat("the grammar is too large (more than ", kMaxGrammarStates,
                                        " automaton states; lower the repetition counts)"));
    states.emplace_back();
    return static_cast<int32_t>(states.size()) - 1;
  }
  void Eps(int32_t from, int32_t to) { states[from].eps.push_back(to); }
  void Byte(int32_t from, uint8_t lo, uint8_t hi, int32_t to) {
    states[from].bytes.push_back({lo, hi, to});
  }

  // Builds `e` between fresh start and end states; returns {start, end}.
  std::pair<int32_t, int32_t> Build(const Expr& e) {
    using K = Expr::Kind;
    switch (e.kind) {
      case K::kEmpty: {
        const int32_t s = New();
        return {s, s};
      }
      case K::kLiteral: {
        const int32_t start = New();
        int32_t cur = start;
        for (unsigned char c : e.text) {
          const int32_t next = New();
          Byte(cur, c, c, next);
          cur = next;
        }
        return {start, cur};
      }
      case K::kBytes: {
        const int32_t start = New(), end = New();
        for (const CodepointRange& r : e.ranges)
          Byte(start, static_cast<uint8_t>(r.lo), static_cast<uint8_t>(std::min(r.hi, 255u)), end);
        return {start, end};
      }
      case K::kClass:
        return BuildClass(e);
      case K::kRule: {
        const int32_t start = New(), end = New();
        states[start].calls.push_back({e.rule, end});
        return {start, end};
      }
      case K::kSeq: {
        auto [start, end] = Build(e.children[0]);
        for (size_t i = 1; i < e.children.size(); ++i) {
          auto [s, t] = Build(e.children[i]);
          Eps(end, s);
          end = t;
        }
        return {start, end};
      }
      case K::kAlt: {
        const int32_t start = New(), end = New();
        for (const Expr& c : e.children) {
          auto [s, t] = Build(c);
          Eps(start, s);
          Eps(t, end);
        }
        return {start, end};
      }
      case K::kRepeat:
        return BuildRepeat(e);
    }
    return {New(), New()};
  }

  std::vector<NfaState> states;

 private:
  std::pair<int32_t, int32_t> BuildClass(const Expr& e) {
    // Normalize to sorted disjoint ranges, complement when negated.
    std::vector<CodepointRange> ranges = e.ranges;
    std::sort(ranges.begin(), ranges.end(),
              [](const CodepointRange& a, const CodepointRange& b) { return a.lo < b.lo; });
    std::vector<CodepointRange> merged;
    for (const CodepointRange& r : ranges) {
      if (!merged.empty() && r.lo <= merged.back().hi + 1)
        merged.back().hi = std::max(merged.back().hi, r.hi);
      else
        merged.push_back(r);
    }
    if (e.negated) {
      std::vector<CodepointRange> complement;
      uint32_t next = 0;
      for (const CodepointRange& r : merged) {
        if (r.lo > next) complement.push_back({next, r.lo - 1});
        next = r.hi + 1;
      }
      if (next <= kMaxCodepoint) complement.push_back({next, kMaxCodepoint});
      merged = std::move(complement);
    }
    const int32_t start = New(), end = New();
    for (const CodepointRange& r : merged) {
      for (const auto& seq : Utf8RangeSequences(r.lo, r.hi)) {
        int32_t cur = start;
        for (size_t i = 0; i < seq.size(); ++i) {
          const int32_t next = i + 1 == seq.size() ? end : New();
          Byte(cur, seq[i].first, seq[i].second, next);
          cur = next;
        }
      }
    }
    return {start, end};
  }

  // x{min,max}: min copies in a row, then either a loop (max unbounded) or max - min optional
  // copies nested as (x (x ...)?)? so that each count matches one way only.
  std::pair<int32_t, int32_t> BuildRepeat(const Expr& e) {
    const Expr& x = e.children[0];
    const int32_t start = New();
    int32_t cur = start;
    for (int i = 0; i < e.min; ++i) {
      auto [s, t] = Build(x);
      Eps(cur, s);
      cur = t;
    }
    if (e.max == kUnbounded) {
      const int32_t loop = New();
      Eps(cur, loop);
      auto [s, t] = Build(x);
      Eps(loop, s);
      Eps(t, loop);
      return {start, loop};
    }
    const int32_t end = New();
    Eps(cur, end);
    for (int i = e.min; i < e.max; ++i) {
      auto [s, t] = Build(x);
      Eps(cur, s);
      Eps(t, end);
      cur = t;
    }
    return {start, end};
  }

  size_t& total_;
};

}  // namespace

// Builds the global automaton and runs the analyses (a friend of Grammar).
class GrammarCompiler {
 public:
  static std::shared_ptr<const Grammar> Build(const GrammarAst& ast);

 private:
  static void Prune(Grammar& g);
};

std::shared_ptr<const Grammar> Grammar::Compile(const GrammarAst& ast) {
  return GrammarCompiler::Build(ast);
}

std::shared_ptr<const Grammar> GrammarCompiler::Build(const GrammarAst& written) {
  MOESERVE_CHECK(written.root >= 0 && static_cast<size_t>(written.root) < written.rules.size());
  const GrammarAst ast = InlineSmallRules(written);
  auto g = std::make_shared<Grammar>();
  g->root_ = ast.root;
  size_t total = 0;
  for (size_t r = 0; r < ast.rules.size(); ++r) {
    RuleNfa nfa(total);
    const auto [start, end] = nfa.Build(ast.rules[r].body);
    // Epsilon elimination: a state's closure contributes its edges; reachable states only.
    const int32_t base = static_cast<int32_t>(g->states_.size());
    std::vector<int32_t> id(nfa.states.size(), -1);
    std::vector<int32_t> order = {start};
    id[start] = base;
    std::vector<int32_t> stack;
    std::vector<uint32_t> seen(nfa.states.size(), 0);
    for (size_t k = 0; k < order.size(); ++k) {
      const int32_t q = order[k];
      FsmState fs;
      fs.rule = static_cast<int32_t>(r);
      std::vector<ByteEdge> bytes;
      std::vector<CallEdge> calls;
      stack = {q};
      seen[q] = static_cast<uint32_t>(k + 1);
      auto map = [&](int32_t t) {
        if (id[t] < 0) {
          id[t] = base + static_cast<int32_t>(order.size());
          order.push_back(t);
        }
        return id[t];
      };
      while (!stack.empty()) {
        const int32_t p = stack.back();
        stack.pop_back();
        if (p == end) fs.final = true;
        for (const ByteEdge& b : nfa.states[p].bytes) bytes.push_back({b.lo, b.hi, map(b.target)});
        for (const CallEdge& c : nfa.states[p].calls) calls.push_back({c.rule, map(c.target)});
        for (int32_t t : nfa.states[p].eps)
          if (seen[t] != k + 1) {
            seen[t] = static_cast<uint32_t>(k + 1);
            stack.push_back(t);
          }
      }
      auto byte_less = [](const ByteEdge& a, const ByteEdge& b) {
        return std::tie(a.lo, a.hi, a.target) < std::tie(b.lo, b.hi, b.target);
      };
      auto byte_eq = [](const ByteEdge& a, const ByteEdge& b) {
        return a.lo == b.lo && a.hi == b.hi && a.target == b.target;
      };
      std::sort(bytes.begin(), bytes.end(), byte_less);
      bytes.erase(std::unique(bytes.begin(), bytes.end(), byte_eq), bytes.end());
      fs.byte_begin = static_cast<uint32_t>(g->byte_edges_.size());
      g->byte_edges_.insert(g->byte_edges_.end(), bytes.begin(), bytes.end());
      fs.byte_end = static_cast<uint32_t>(g->byte_edges_.size());
      fs.call_begin = static_cast<uint32_t>(g->call_edges_.size());
      g->call_edges_.insert(g->call_edges_.end(), calls.begin(), calls.end());
      fs.call_end = static_cast<uint32_t>(g->call_edges_.size());
      g->states_.push_back(fs);
    }
    g->rule_start_.push_back(base);
    g->rule_names_.push_back(ast.rules[r].name);
  }
  Prune(*g);
  return g;
}

// Fixpoints over the automaton: nullable rules, productive rules, live states; then drops the
// edges that lead nowhere.
void GrammarCompiler::Prune(Grammar& g) {
  const size_t n = g.states_.size(), num_rules = g.rule_start_.size();
  // A state is live when its rule can end from it consuming bytes and calling live rules only.
  std::vector<bool> live(n, false), productive(num_rules, false);
  for (size_t s = 0; s < n; ++s) live[s] = g.states_[s].final;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t s = 0; s < n; ++s) {
      if (live[s]) continue;
      bool ok = false;
      for (const ByteEdge& b : g.bytes_of(static_cast<int32_t>(s))) ok = ok || live[b.target];
      for (const CallEdge& c : g.calls_of(static_cast<int32_t>(s)))
        ok = ok || (productive[c.rule] && live[c.target]);
      if (ok) live[s] = changed = true;
    }
    for (size_t r = 0; r < num_rules; ++r)
      if (!productive[r] && live[g.rule_start_[r]]) productive[r] = changed = true;
  }
  if (!productive[g.root_])
    throw GrammarError(detail::Concat("the grammar matches no string: rule '",
                                      g.rule_names_[g.root_], "' can never finish"));
  // Rewrite edge lists without dead targets.
  std::vector<ByteEdge> bytes;
  std::vector<CallEdge> calls;
  for (size_t s = 0; s < n; ++s) {
    FsmState& fs = g.states_[s];
    const uint32_t b0 = static_cast<uint32_t>(bytes.size()),
                   c0 = static_cast<uint32_t>(calls.size());
    if (live[s]) {
      for (const ByteEdge& b : g.bytes_of(static_cast<int32_t>(s)))
        if (live[b.target]) bytes.push_back(b);
      for (const CallEdge& c : g.calls_of(static_cast<int32_t>(s)))
        if (productive[c.rule] && live[c.target]) calls.push_back(c);
    }
    fs.byte_begin = b0;
    fs.byte_end = static_cast<uint32_t>(bytes.size());
    fs.call_begin = c0;
    fs.call_end = static_cast<uint32_t>(calls.size());
  }
  g.byte_edges_ = std::move(bytes);
  g.call_edges_ = std::move(calls);
  // Nullable: the rule can end without consuming a byte.
  g.rule_nullable_.assign(num_rules, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < num_rules; ++r) {
      if (g.rule_nullable_[r]) continue;
      // States reachable from the start through nullable calls only.
      std::vector<int32_t> todo = {g.rule_start_[r]}, seen = todo;
      bool nullable = false;
      while (!todo.empty() && !nullable) {
        const int32_t s = todo.back();
        todo.pop_back();
        nullable = g.states_[s].final;
        for (const CallEdge& c : g.calls_of(s))
          if (g.rule_nullable_[c.rule] &&
              std::find(seen.begin(), seen.end(), c.target) == seen.end()) {
            seen.push_back(c.target);
            todo.push_back(c.target);
          }
      }
      if (nullable) g.rule_nullable_[r] = changed = true;
    }
  }
}

}  // namespace moeserve::grammar
