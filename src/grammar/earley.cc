#include "grammar/earley.h"

namespace moeserve::grammar {

EarleyParser::EarleyParser(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)), stamp_(grammar_->num_states(), 0) {
  ResetToRoot();
}

void EarleyParser::Reset(int32_t state, uint32_t origin) {
  items_.clear();
  set_begin_.assign(1, 0);
  exited_.assign(1, false);
  overflowed_ = false;
  ++generation_;
  Add(state, origin);
  Close();
}

void EarleyParser::Add(int32_t state, uint32_t origin) {
  const size_t begin = set_begin_.back();
  if (stamp_[state] == generation_) {
    for (size_t i = begin; i < items_.size(); ++i)
      if (items_[i].state == state && items_[i].origin == origin) return;
  }
  stamp_[state] = generation_;
  items_.push_back({state, origin});
}

void EarleyParser::Close() {
  const Grammar& g = *grammar_;
  const auto k = static_cast<uint32_t>(set_begin_.size() - 1);
  for (size_t i = set_begin_.back(); i < items_.size(); ++i) {
    if (items_.size() - set_begin_.back() > kMaxItemsPerSet) {
      overflowed_ = true;
      return;
    }
    const EarleyItem item = items_[i];
    for (const CallEdge& c : g.calls_of(item.state)) {
      Add(g.rule_start(c.rule), k);
      if (g.rule_nullable(c.rule)) Add(c.target, item.origin);
    }
    const FsmState& st = g.state(item.state);
    if (!st.final) continue;
    if (item.origin == kContext) {
      exited_.back() = true;
    } else if (item.origin != k) {  // an empty match was handled when it was predicted
      const size_t end = set_begin_[item.origin + 1];
      for (size_t j = set_begin_[item.origin]; j < end; ++j) {
        const EarleyItem caller = items_[j];
        for (const CallEdge& c : g.calls_of(caller.state))
          if (c.rule == st.rule) Add(c.target, caller.origin);
      }
    }
  }
}

bool EarleyParser::Advance(uint8_t byte) {
  const Grammar& g = *grammar_;
  const size_t prev_begin = set_begin_.back(), prev_end = items_.size();
  set_begin_.push_back(static_cast<uint32_t>(prev_end));
  exited_.push_back(false);
  ++generation_;
  for (size_t i = prev_begin; i < prev_end; ++i) {
    const EarleyItem item = items_[i];
    for (const ByteEdge& e : g.bytes_of(item.state)) {
      if (byte < e.lo) break;  // edges are sorted by lo
      if (byte <= e.hi) Add(e.target, item.origin);
    }
  }
  if (items_.size() > prev_end) Close();
  if (items_.size() == prev_end || overflowed_) {
    items_.resize(prev_end);
    set_begin_.pop_back();
    exited_.pop_back();
    return false;
  }
  return true;
}

void EarleyParser::Truncate(size_t num_sets) {
  MOESERVE_CHECK(num_sets >= 1 && num_sets <= set_begin_.size(), "truncate to ", num_sets, " of ",
                 set_begin_.size());
  if (num_sets == set_begin_.size()) return;
  items_.resize(set_begin_[num_sets]);
  set_begin_.resize(num_sets);
  exited_.resize(num_sets);
  overflowed_ = false;
}

bool EarleyParser::CanFinish() const {
  const Grammar& g = *grammar_;
  for (const EarleyItem& item : last_set()) {
    const FsmState& st = g.state(item.state);
    if (st.final && item.origin == 0 && st.rule == g.root()) return true;
  }
  return false;
}

bool EarleyParser::CanContinue() const {
  for (const EarleyItem& item : last_set())
    if (!grammar_->bytes_of(item.state).empty()) return true;
  return false;
}

}  // namespace moeserve::grammar
