#include "grammar/compiled_grammar.h"

#include <algorithm>
#include <array>
#include <map>
#include <unordered_map>

#include "grammar/earley.h"

namespace moeserve::grammar {

std::shared_ptr<const StateTokenClasses> TokenClassCache::Find(const std::string& shape) const {
  std::lock_guard lock(mu_);
  auto it = by_shape_.find(shape);
  return it == by_shape_.end() ? nullptr : it->second;
}

void TokenClassCache::Insert(const std::string& shape,
                             std::shared_ptr<const StateTokenClasses> classes) {
  std::lock_guard lock(mu_);
  if (by_shape_.size() < max_entries_) by_shape_.emplace(shape, std::move(classes));
}

size_t TokenClassCache::size() const {
  std::lock_guard lock(mu_);
  return by_shape_.size();
}

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Grammar> grammar,
                                 std::shared_ptr<const Vocabulary> vocabulary,
                                 std::shared_ptr<TokenClassCache> shared)
    : grammar_(std::move(grammar)),
      vocabulary_(std::move(vocabulary)),
      shared_(shared ? std::move(shared) : std::make_shared<TokenClassCache>()),
      classes_(grammar_->num_states()) {}

const StateTokenClasses& CompiledGrammar::ClassesOf(int32_t state) const {
  std::lock_guard lock(mu_);
  auto& slot = classes_[state];
  if (!slot) slot = Classify(state);
  return *slot;
}

void CompiledGrammar::PrecomputeAll() const {
  for (size_t s = 0; s < grammar_->num_states(); ++s)
    if (!grammar_->bytes_of(static_cast<int32_t>(s)).empty()) ClassesOf(static_cast<int32_t>(s));
}

size_t CompiledGrammar::num_cached_states() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& c : classes_) n += c != nullptr;
  return n;
}

namespace {

// Follows byte edges only: the Earley parse reduced to what it does inside a region of one rule
// that calls no other rule (string contents, numbers, whitespace). The sets of automaton states
// it meets become DFA states with a 256-entry transition row each, built as they are met, so a
// byte costs a table lookup instead of an Earley step. Same interface as the part of EarleyParser
// that ClassifyTokens uses; reaching a final state is an exit of the rule.
class CallFreeWalker {
 public:
  CallFreeWalker(const Grammar& g, int32_t state) : g_(g) { path_.push_back(Intern({state})); }

  // The shape of the region reachable from `state` by byte edges (states numbered in the order
  // a breadth-first walk meets them, with final flags and edges), or "" when some state in it
  // calls a rule (the walker does not apply) or it is very large. Equal shapes, equal classes.
  static std::string Shape(const Grammar& g, int32_t state) {
    std::vector<int32_t> order = {state};
    std::unordered_map<int32_t, uint32_t> local = {{state, 0}};
    std::string shape;
    for (size_t i = 0; i < order.size(); ++i) {
      const int32_t s = order[i];
      if (!g.calls_of(s).empty() || order.size() > 4096) return "";
      shape += g.state(s).final ? 'F' : 'N';
      for (const ByteEdge& e : g.bytes_of(s)) {
        auto [it, inserted] = local.try_emplace(e.target, static_cast<uint32_t>(order.size()));
        if (inserted) order.push_back(e.target);
        const uint32_t t = it->second;
        shape += static_cast<char>(e.lo);
        shape += static_cast<char>(e.hi);
        shape.append(reinterpret_cast<const char*>(&t), sizeof t);
      }
      shape += ';';
    }
    return shape;
  }

  bool Advance(uint8_t byte) {
    // Step may intern a new DFA state, which grows rows_: no reference into it across the call.
    int32_t next = rows_[path_.back()][byte];
    if (next == kUnknown) next = rows_[path_.back()][byte] = Step(path_.back(), byte);
    if (next == kDead) return false;
    path_.push_back(next);
    return true;
  }
  void Truncate(size_t num_sets) { path_.resize(num_sets); }
  bool exited(size_t i) const { return final_[path_[i]]; }

 private:
  static constexpr int32_t kUnknown = -2, kDead = -1;

  int32_t Intern(std::vector<int32_t> set) {
    std::sort(set.begin(), set.end());
    auto [it, inserted] = ids_.try_emplace(set, static_cast<int32_t>(sets_.size()));
    if (inserted) {
      bool final = false;
      for (int32_t s : set) final = final || g_.state(s).final;
      sets_.push_back(std::move(set));
      final_.push_back(final);
      rows_.emplace_back();
      rows_.back().fill(kUnknown);
    }
    return it->second;
  }
  int32_t Step(int32_t from, uint8_t byte) {
    std::vector<int32_t> next;
    for (int32_t s : sets_[from])
      for (const ByteEdge& e : g_.bytes_of(s))
        if (byte >= e.lo && byte <= e.hi &&
            std::find(next.begin(), next.end(), e.target) == next.end())
          next.push_back(e.target);
    return next.empty() ? kDead : Intern(std::move(next));
  }

  const Grammar& g_;
  std::vector<int32_t> path_;  // DFA state after each consumed byte
  std::vector<std::vector<int32_t>> sets_;
  std::vector<bool> final_;
  std::vector<std::array<int32_t, 256>> rows_;
  std::map<std::vector<int32_t>, int32_t> ids_;
};

// Walks the sorted vocabulary from a parse that starts at one item (state, kContext). `depth` is
// how many bytes of the current token prefix are consumed; a failure at byte d of a token fails
// every following token that shares its first d + 1 bytes, which the lcp array tells at once.
template <typename Walker>
void ClassifyTokens(Walker& parser, const Vocabulary& vocab, StateTokenClasses& out) {
  std::vector<int32_t> accepted;
  // exit_on_path[d]: the rule ended after byte 1..d of the current prefix.
  std::vector<bool> exit_on_path(1, false);
  size_t depth = 0;
  size_t dead_len = SIZE_MAX;   // the previous token failed at its byte dead_len - 1
  bool dead_uncertain = false;  // ... and the rule had ended before that byte
  const auto sorted = vocab.sorted();
  const auto lcp = vocab.lcp();
  for (size_t r = 0; r < sorted.size(); ++r) {
    const std::string_view tok = vocab.sorted_bytes(r);
    if (lcp[r] >= dead_len) {
      if (dead_uncertain) out.uncertain_ranks.push_back(static_cast<int32_t>(r));
      continue;
    }
    dead_len = SIZE_MAX;
    if (depth > lcp[r]) {
      depth = lcp[r];
      parser.Truncate(depth + 1);
      exit_on_path.resize(depth + 1);
    }
    while (depth < tok.size()) {
      if (!parser.Advance(static_cast<uint8_t>(tok[depth]))) {
        dead_len = depth + 1;
        break;
      }
      ++depth;
      exit_on_path.push_back(exit_on_path.back() || parser.exited(depth));
    }
    if (dead_len == SIZE_MAX) {
      accepted.push_back(sorted[r]);
    } else {
      dead_uncertain = exit_on_path[depth];
      if (dead_uncertain) out.uncertain_ranks.push_back(static_cast<int32_t>(r));
      // The first byte failed: so does every token starting with it (no exit before byte 1).
      if (dead_len == 1) r = vocab.first_byte_end(static_cast<uint8_t>(tok[0])) - 1;
    }
  }
  if (accepted.size() * 32 > vocab.size()) {
    out.accepted_bits.assign(BitmaskWords(vocab.size()), 0);
    for (int32_t id : accepted) BitmaskSet(out.accepted_bits, id);
  } else {
    out.accepted_ids = std::move(accepted);
  }
}

}  // namespace

std::shared_ptr<const StateTokenClasses> CompiledGrammar::Classify(int32_t state) const {
  auto out = std::make_shared<StateTokenClasses>();
  const std::string shape = CallFreeWalker::Shape(*grammar_, state);
  if (!shape.empty()) {
    if (auto known = shared_->Find(shape)) return known;
    CallFreeWalker walker(*grammar_, state);
    ClassifyTokens(walker, *vocabulary_, *out);
    shared_->Insert(shape, out);
  } else {
    EarleyParser parser(grammar_);
    parser.Reset(state, EarleyParser::kContext);
    ClassifyTokens(parser, *vocabulary_, *out);
  }
  return out;
}

std::shared_ptr<const CompiledGrammar> CompileForVocabulary(
    const GrammarAst& ast, std::shared_ptr<const Vocabulary> vocabulary,
    std::shared_ptr<TokenClassCache> shared) {
  return std::make_shared<CompiledGrammar>(Grammar::Compile(ast), std::move(vocabulary),
                                           std::move(shared));
}

}  // namespace moeserve::grammar
