// Inlining of small non-recursive rules before compilation. Why: the token cache classifies a
// token per automaton state, and a token that runs past the end of a rule is "uncertain" and must
// be checked against the real parse at every step. A nullable helper like `ws ::= [ \t\n]*`
// called between tokens makes every token that starts with a space uncertain (tens of thousands
// in a 200k vocabulary); inlined, the same tokens are simply accepted or rejected inside the
// caller's automaton.
#include <functional>

#include "grammar/grammar.h"

namespace moeserve::grammar {
namespace {

constexpr size_t kMaxInlinedStates = 128;

size_t Saturate(size_t v) {
  return std::min<size_t>(v, 1u << 30);
}

void CollectRefs(const Expr& e, std::vector<int>& out) {
  if (e.kind == Expr::Kind::kRule) out.push_back(e.rule);
  for (const Expr& c : e.children) CollectRefs(c, out);
}

}  // namespace

GrammarAst InlineSmallRules(const GrammarAst& ast) {
  const size_t n = ast.rules.size();
  std::vector<std::vector<int>> refs(n);
  for (size_t r = 0; r < n; ++r) CollectRefs(ast.rules[r].body, refs[r]);
  // A rule is recursive when it reaches itself.
  std::vector<bool> recursive(n, false);
  for (size_t r = 0; r < n; ++r) {
    std::vector<bool> seen(n, false);
    std::vector<int> todo = refs[r];
    while (!todo.empty() && !recursive[r]) {
      const int x = todo.back();
      todo.pop_back();
      if (x == static_cast<int>(r)) recursive[r] = true;
      if (seen[x]) continue;
      seen[x] = true;
      todo.insert(todo.end(), refs[x].begin(), refs[x].end());
    }
  }
  // Estimated automaton size of each rule once its own inlinable references are expanded.
  std::vector<size_t> size(n, 0);
  std::vector<int> state(n, 0);  // 0 unvisited, 1 in progress, 2 done
  std::vector<bool> inlinable(n, false);
  std::function<size_t(const Expr&)> estimate;
  std::function<void(int)> visit = [&](int r) {
    if (state[r] != 0) return;
    state[r] = 1;
    size[r] = estimate(ast.rules[r].body);
    state[r] = 2;
    inlinable[r] = !recursive[r] && r != ast.root && size[r] <= kMaxInlinedStates;
  };
  estimate = [&](const Expr& e) -> size_t {
    switch (e.kind) {
      case Expr::Kind::kEmpty:
        return 1;
      case Expr::Kind::kLiteral:
        return e.text.size() + 1;
      case Expr::Kind::kClass: {
        bool ascii = !e.negated;
        for (const CodepointRange& r : e.ranges) ascii = ascii && r.hi < 0x80;
        return ascii ? 2 : 2 + 4 * e.ranges.size() + 12;
      }
      case Expr::Kind::kBytes:
        return 2;
      case Expr::Kind::kRule:
        if (!recursive[e.rule]) visit(e.rule);
        return inlinable[e.rule] ? size[e.rule] : 2;
      case Expr::Kind::kSeq:
      case Expr::Kind::kAlt: {
        size_t total = 2;
        for (const Expr& c : e.children) total = Saturate(total + estimate(c));
        return total;
      }
      case Expr::Kind::kRepeat: {
        const size_t copies = e.max == kUnbounded ? e.min + 1 : e.max;
        return Saturate(2 + estimate(e.children[0]) * std::max<size_t>(copies, 1));
      }
    }
    return 1;
  };
  for (size_t r = 0; r < n; ++r) visit(static_cast<int>(r));

  std::function<Expr(const Expr&)> rewrite = [&](const Expr& e) -> Expr {
    if (e.kind == Expr::Kind::kRule && inlinable[e.rule]) return rewrite(ast.rules[e.rule].body);
    Expr out = e;
    for (Expr& c : out.children) c = rewrite(c);
    return out;
  };
  GrammarAst out = ast;
  for (size_t r = 0; r < n; ++r) out.rules[r].body = rewrite(ast.rules[r].body);
  return out;
}

}  // namespace moeserve::grammar
