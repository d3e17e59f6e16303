#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <queue>

#include "core/check.h"
#include "tokenizer/unicode.h"

namespace moeserve::tokenizer {
namespace {

constexpr const char* kWhat = "tokenizer model BPE";

uint64_t PairKey(int32_t left, int32_t right) {
  return (uint64_t(uint32_t(left) + 1) << 32) | uint64_t(uint32_t(right) + 1);
}

uint64_t MixHash(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k;
}

std::optional<std::string> OptionalString(const nlohmann::json& model, const char* key) {
  auto it = model.find(key);
  if (it == model.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) Fail(kWhat, ": '", key, "' must be a string or null");
  return it->get<std::string>();
}

bool OptionalBool(const nlohmann::json& model, const char* key) {
  auto it = model.find(key);
  if (it == model.end() || it->is_null()) return false;
  if (!it->is_boolean()) Fail(kWhat, ": '", key, "' must be a boolean");
  return it->get<bool>();
}

}  // namespace

BpeModel::BpeModel(const nlohmann::json& model) : cache_(new CacheShard[kCacheShards]) {
  if (!model.is_object()) Fail(kWhat, ": 'model' must be an object");
  auto dropout = model.find("dropout");
  if (dropout != model.end() && !dropout->is_null() && dropout->get<double>() != 0.0) {
    Fail(kWhat, ": dropout is not supported (inference needs deterministic ids)");
  }
  unk_token_ = OptionalString(model, "unk_token");
  prefix_ = OptionalString(model, "continuing_subword_prefix");
  suffix_ = OptionalString(model, "end_of_word_suffix");
  fuse_unk_ = OptionalBool(model, "fuse_unk");
  byte_fallback_ = OptionalBool(model, "byte_fallback");
  ignore_merges_ = OptionalBool(model, "ignore_merges");

  auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) Fail(kWhat, ": 'vocab' must be an object");
  vocab_.reserve(vocab->size());
  int64_t max_id = -1;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() >= (int64_t(1) << 31) - 1) {
      Fail(kWhat, ": vocab entry '", it.key(), "' has no valid id");
    }
    int32_t id = it.value().get<int32_t>();
    vocab_[it.key()] = id;
    max_id = std::max<int64_t>(max_id, id);
  }
  id_to_token_.resize(size_t(max_id + 1));
  id_present_.assign(size_t(max_id + 1), false);
  for (const auto& [token, id] : vocab_) {
    id_to_token_[size_t(id)] = token;
    id_present_[size_t(id)] = true;
  }

  auto merges = model.find("merges");
  size_t num_merges = merges == model.end() || merges->is_null() ? 0 : merges->size();
  if (num_merges > 0 && !merges->is_array()) Fail(kWhat, ": 'merges' must be an array");
  size_t capacity = 16;
  while (capacity < num_merges * 2) capacity <<= 1;
  merges_.assign(capacity, MergeEntry{0, 0, 0});
  merge_mask_ = capacity - 1;
  auto lookup = [&](const std::string& token) {
    auto it = vocab_.find(token);
    if (it == vocab_.end()) Fail(kWhat, ": merge token '", token, "' is not in the vocab");
    return it->second;
  };
  const size_t prefix_len = prefix_ ? prefix_->size() : 0;
  for (size_t rank = 0; rank < num_merges; ++rank) {
    const auto& m = (*merges)[rank];
    std::string left, right;
    // Two serializations: "a b" (split at the single space) and ["a", "b"].
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        Fail(kWhat, ": merge ", rank, " '", s, "' is not two tokens separated by one space");
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      Fail(kWhat, ": merge ", rank, " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    int32_t left_id = lookup(left);
    int32_t right_id = lookup(right);
    if (right.size() < prefix_len) Fail(kWhat, ": merge ", rank, " right side shorter than prefix");
    int32_t new_id = lookup(left + right.substr(prefix_len));
    // A repeated pair keeps the later rank, as the reference's map insertion does.
    AddMerge(left_id, right_id, uint32_t(rank), new_id);
  }

  const ByteLevelAlphabet& alphabet = GetByteLevelAlphabet();
  for (int b = 0; b < 256; ++b) {
    std::string s = alphabet.byte_to_utf8[b];
    byte_ids_[size_t(b)] = -1;
    // Deferred byte-level words only take the fast path without prefix/suffix decoration.
    if (prefix_ || suffix_) continue;
    auto it = vocab_.find(s);
    if (it != vocab_.end()) byte_ids_[size_t(b)] = it->second;
  }
  if (unk_token_ && !vocab_.count(*unk_token_)) {
    Fail(kWhat, ": unk_token '", *unk_token_, "' is not in the vocab");
  }
}

BpeModel::~BpeModel() = default;

void BpeModel::AddMerge(int32_t left, int32_t right, uint32_t rank, int32_t new_id) {
  uint64_t key = PairKey(left, right);
  for (uint64_t slot = MixHash(key) & merge_mask_;; slot = (slot + 1) & merge_mask_) {
    MergeEntry& e = merges_[slot];
    if (e.key == 0 || e.key == key) {
      e = MergeEntry{key, rank, new_id};
      return;
    }
  }
}

const BpeModel::MergeEntry* BpeModel::FindMerge(int32_t left, int32_t right) const {
  uint64_t key = PairKey(left, right);
  for (uint64_t slot = MixHash(key) & merge_mask_;; slot = (slot + 1) & merge_mask_) {
    const MergeEntry& e = merges_[slot];
    if (e.key == key) return &e;
    if (e.key == 0) return nullptr;
  }
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::IdToToken(int32_t id) const {
  if (id < 0 || size_t(id) >= id_to_token_.size() || !id_present_[size_t(id)]) return nullptr;
  return &id_to_token_[size_t(id)];
}

void BpeModel::MergeSymbols(std::vector<int32_t>& symbols, bool force_heap) const {
  if (symbols.size() < 2) return;
  if (force_heap || symbols.size() > 48) {
    MergeHeap(symbols);
  } else {
    MergeScan(symbols);
  }
}

// Short words: keep the rank of every adjacent pair, merge the lowest (leftmost on ties), and
// refresh only the two neighbouring ranks. O(n^2) comparisons but no allocation.
void BpeModel::MergeScan(std::vector<int32_t>& sym) const {
  constexpr uint32_t kNone = UINT32_MAX;
  size_t n = sym.size();
  uint32_t ranks[64];
  int32_t new_ids[64];
  auto refresh = [&](size_t i) {
    const MergeEntry* m = FindMerge(sym[i], sym[i + 1]);
    ranks[i] = m ? m->rank : kNone;
    new_ids[i] = m ? m->new_id : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i) refresh(i);
  while (n > 1) {
    size_t best = 0;
    uint32_t best_rank = kNone;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (ranks[i] < best_rank) {
        best_rank = ranks[i];
        best = i;
      }
    }
    if (best_rank == kNone) break;
    sym[best] = new_ids[best];
    for (size_t i = best + 1; i + 1 < n; ++i) {
      sym[i] = sym[i + 1];
      if (i + 1 < n - 1) {
        ranks[i] = ranks[i + 1];
        new_ids[i] = new_ids[i + 1];
      }
    }
    --n;
    if (best + 1 < n) refresh(best);
    if (best > 0) refresh(best - 1);
  }
  sym.resize(n);
}

// Long words: a min-heap of (rank, position) over a linked list, skipping stale entries. Same
// order of merges as the scan: lowest rank first, leftmost position on ties.
void BpeModel::MergeHeap(std::vector<int32_t>& sym) const {
  struct Node {
    int32_t id;
    int32_t prev, next;
  };
  struct Candidate {
    uint32_t rank;
    int32_t pos;
    int32_t left, right;  // the pair this entry was made for, to detect staleness
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  const int32_t n = int32_t(sym.size());
  std::vector<Node> nodes(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i)
    nodes[size_t(i)] = Node{sym[size_t(i)], i - 1, i + 1 < n ? i + 1 : -1};
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int32_t pos) {
    int32_t next = nodes[size_t(pos)].next;
    if (next < 0) return;
    const MergeEntry* m = FindMerge(nodes[size_t(pos)].id, nodes[size_t(next)].id);
    if (m) heap.push(Candidate{m->rank, pos, nodes[size_t(pos)].id, nodes[size_t(next)].id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    Node& left = nodes[size_t(c.pos)];
    if (left.id != c.left || left.next < 0) continue;
    Node& right = nodes[size_t(left.next)];
    if (right.id != c.right) continue;
    const MergeEntry* m = FindMerge(left.id, right.id);
    left.id = m->new_id;
    right.id = -1;
    left.next = right.next;
    if (left.next >= 0) nodes[size_t(left.next)].prev = c.pos;
    if (left.prev >= 0) push(left.prev);
    push(c.pos);
  }
  sym.clear();
  for (int32_t i = 0; i >= 0 && i < n; i = nodes[size_t(i)].next)
    sym.push_back(nodes[size_t(i)].id);
}

void BpeModel::MergeWord(std::string_view w, std::vector<int32_t>& out) const {
  std::vector<int32_t> sym;
  sym.reserve(w.size());
  std::optional<int32_t> unk_id;
  if (unk_token_) unk_id = vocab_.find(*unk_token_)->second;
  bool pending_unk = false;
  std::string piece;
  size_t pos = 0;
  while (pos < w.size()) {
    size_t start = pos;
    pos += Utf8Length(uint8_t(w[pos]));
    piece.assign(w.substr(start, pos - start));
    if (start > 0 && prefix_) piece.insert(0, *prefix_);
    if (pos >= w.size() && suffix_) piece += *suffix_;
    auto it = vocab_.find(piece);
    if (it != vocab_.end()) {
      if (pending_unk) sym.push_back(*unk_id);
      pending_unk = false;
      sym.push_back(it->second);
      continue;
    }
    if (byte_fallback_) {
      std::vector<int32_t> bytes;
      for (char c : piece) {
        char code[8];
        std::snprintf(code, sizeof(code), "<0x%02X>", unsigned(uint8_t(c)));
        auto b = vocab_.find(std::string_view(code));
        if (b == vocab_.end()) break;
        bytes.push_back(b->second);
      }
      if (bytes.size() == piece.size()) {
        // Like the reference, a byte-fallback run does not flush a pending unk.
        sym.insert(sym.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (unk_id) {
      if (pending_unk && !fuse_unk_) sym.push_back(*unk_id);
      pending_unk = true;
    }
    // Without an unk token the character is dropped, as in the reference.
  }
  if (pending_unk) sym.push_back(*unk_id);
  MergeSymbols(sym);
  out.insert(out.end(), sym.begin(), sym.end());
}

void BpeModel::Tokenize(std::string_view word, bool byte_level, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  const bool cacheable = word.size() < kCacheMaxWordBytes;
  CacheShard* shard = nullptr;
  if (cacheable) {
    shard = &cache_[std::hash<std::string_view>{}(word) % kCacheShards];
    std::shared_lock lock(shard->mu);
    auto it = shard->map.find(word);
    if (it != shard->map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t out_start = out.size();
  std::string mapped_storage;
  std::string_view mapped = word;
  bool fast_bytes = false;
  if (byte_level) {
    fast_bytes = true;
    for (char c : word) fast_bytes &= byte_ids_[uint8_t(c)] >= 0;
    if (!fast_bytes || ignore_merges_) {
      const ByteLevelAlphabet& alphabet = GetByteLevelAlphabet();
      mapped_storage.reserve(word.size() * 2);
      for (char c : word) mapped_storage += alphabet.byte_to_utf8[uint8_t(c)];
      mapped = mapped_storage;
    }
  }
  std::optional<int32_t> whole;
  if (ignore_merges_) whole = TokenToId(mapped);
  if (whole) {
    out.push_back(*whole);
  } else if (fast_bytes) {
    // Every byte's char is a token and no prefix/suffix applies: start from the byte ids.
    std::vector<int32_t> sym(word.size());
    for (size_t i = 0; i < word.size(); ++i) sym[i] = byte_ids_[uint8_t(word[i])];
    MergeSymbols(sym);
    out.insert(out.end(), sym.begin(), sym.end());
  } else {
    MergeWord(mapped, out);
  }
  if (cacheable) {
    std::unique_lock lock(shard->mu);
    if (shard->map.size() < kCacheEntriesPerShard) {
      shard->map.emplace(std::string(word),
                         std::vector<int32_t>(out.begin() + std::ptrdiff_t(out_start), out.end()));
    }
  }
}

}  // namespace moeserve::tokenizer
