// What one forward step computes: a flat batch of tokens drawn from one or more sequences, each
// sequence contributing a contiguous run of new tokens (a prefill chunk or one decode token), plus
// where their keys and values live.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.h"

namespace moeserve::model {

// The paged KV store the model reads and writes. A block holds `block_size` consecutive positions
// of one sequence: [block_size, kv_heads_per_rank, head_dim] bf16 for K, the same for V, per layer.
// Implemented by cache/ (the layer above), so the model knows no allocation policy.
class KvStorage {
 public:
  virtual ~KvStorage() = default;
  virtual size_t block_size() const = 0;
  virtual bf16* KeyBlock(size_t layer, int32_t block) = 0;
  virtual bf16* ValueBlock(size_t layer, int32_t block) = 0;
};

// Shape of the per-rank KV a model needs, for sizing a KvStorage.
struct KvLayout {
  size_t num_layers = 0;
  size_t num_kv_heads = 0;  // on this rank
  size_t head_dim = 0;
  size_t BytesPerToken() const { return num_layers * 2 * num_kv_heads * head_dim * sizeof(bf16); }
};

struct SequenceSlice {
  size_t num_new_tokens = 0;  // rows of the flat batch, contiguous, in sequence order
  size_t context_len = 0;     // positions already in the cache; new tokens get context_len + i
  // Block ids covering positions [0, context_len + num_new_tokens).
  std::span<const int32_t> block_table;
};

struct Batch {
  std::vector<int32_t> token_ids;  // [T]
  std::vector<SequenceSlice> seqs;
  std::vector<int32_t> logits_rows;  // rows of the flat batch whose logits are wanted, ascending

  size_t num_tokens() const { return token_ids.size(); }
};

}  // namespace moeserve::model
