#include "grammar/compiled_grammar.h"

#include "grammar/earley.h"

namespace moeserve::grammar {

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Grammar> grammar,
                                 std::shared_ptr<const Vocabulary> vocabulary)
    : grammar_(std::move(grammar)),
      vocabulary_(std::move(vocabulary)),
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

// Walks the sorted vocabulary from a parse that starts at one item (state, kContext). `depth` is
// how many bytes of the current token prefix are consumed; a failure at byte d of a token fails
// every following token that shares its first d + 1 bytes, which the lcp array tells at once.
std::unique_ptr<StateTokenClasses> CompiledGrammar::Classify(int32_t state) const {
  const Vocabulary& vocab = *vocabulary_;
  EarleyParser parser(grammar_);
  parser.Reset(state, EarleyParser::kContext);
  auto out = std::make_unique<StateTokenClasses>();
  std::vector<int32_t> accepted;
  // exit_on_path[d]: the rule ended after byte 1..d of the current prefix.
  std::vector<bool> exit_on_path(1, false);
  size_t depth = 0;
  size_t dead_len = SIZE_MAX;   // the previous token failed at its byte dead_len - 1
  bool dead_uncertain = false;  // ... and the rule had ended before that byte
  const auto sorted = vocab.sorted();
  const auto lcp = vocab.lcp();
  for (size_t r = 0; r < sorted.size(); ++r) {
    const std::string& tok = vocab.bytes(sorted[r]);
    if (lcp[r] >= dead_len) {
      if (dead_uncertain) out->uncertain_ranks.push_back(static_cast<int32_t>(r));
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
      if (dead_uncertain) out->uncertain_ranks.push_back(static_cast<int32_t>(r));
    }
  }
  if (accepted.size() * 32 > vocab.size()) {
    out->accepted_bits.assign(BitmaskWords(vocab.size()), 0);
    for (int32_t id : accepted) BitmaskSet(out->accepted_bits, id);
  } else {
    out->accepted_ids = std::move(accepted);
  }
  return out;
}

std::shared_ptr<const CompiledGrammar> CompileForVocabulary(
    const GrammarAst& ast, std::shared_ptr<const Vocabulary> vocabulary) {
  return std::make_shared<CompiledGrammar>(Grammar::Compile(ast), std::move(vocabulary));
}

}  // namespace moeserve::grammar
