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

// Shape of the per-rank KV a model needs, for sizing a KvStorage. The model gives the shape;
// whoever sizes the cache chooses the element type:
//  - kBF16: a block is [block_size, num_kv_heads, head_dim] bf16;
//  - kF8E4M3: [block_size, num_kv_heads, head_dim] e4m3 codes, then one f32 scale per (token,
//    kv head) (kernels/quant.h: KvBlockBytesFp8), about half the bytes.
struct KvLayout {
  size_t num_layers = 0;
  size_t num_kv_heads = 0;  // on this rank
  size_t head_dim = 0;
  DType dtype = DType::kBF16;

  // Bytes of one K (or V) block of one layer.
  size_t BlockBytes(size_t block_size) const;
  // Bytes of K and V of all layers for one position (block padding aside).
  size_t BytesPerToken() const;
};

// The paged KV store the model reads and writes. A block holds `block_size` consecutive positions
// of one sequence, laid out as KvLayout says, for K and for V, per layer.
// Implemented by cache/ (the layer above), so the model knows no allocation policy.
class KvStorage {
 public:
  virtual ~KvStorage() = default;
  virtual size_t block_size() const = 0;
  virtual DType dtype() const = 0;
  virtual uint8_t* KeyBlock(size_t layer, int32_t block) = 0;
  virtual uint8_t* ValueBlock(size_t layer, int32_t block) = 0;
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
