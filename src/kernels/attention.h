// Causal grouped-query attention reading K/V through block tables (paged KV cache).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "kernels/context.h"

namespace moeserve::kernels {

// One sequence's slice of the flat batch. Its q_len new tokens are rows q_begin.. of q/out, at
// positions kv_len − q_len .. kv_len − 1; their K/V are already in the cache. Position p of the
// sequence lives in block k_blocks[p / block_size], row p % block_size, in one of two cache
// formats (set one pair of block tables; every sequence of a call uses the same format):
//  - bf16 (k_blocks, v_blocks): a block is [block_size, num_kv_heads, head_dim] bf16.
//  - FP8 e4m3 (k_blocks8, v_blocks8): a block is KvBlockBytesFp8(block_size, num_kv_heads,
//    head_dim) bytes (kernels/quant.h): codes [block_size, num_kv_heads, head_dim], then f32
//    scales [block_size, num_kv_heads] at KvScaleOffsetFp8(...); blocks 4-byte aligned, rows
//    written with WriteKvRowFp8 (scale = amax / 448 per token and kv head). K/V values are
//    dequantized exactly (e4m3 · scale, one f32 rounding), then everything is as for bf16.
struct AttentionSeq {
  size_t q_begin = 0;
  size_t q_len = 0;
  size_t kv_len = 0;
  const bf16* const* k_blocks = nullptr;
  const bf16* const* v_blocks = nullptr;
  const uint8_t* const* k_blocks8 = nullptr;
  const uint8_t* const* v_blocks8 = nullptr;
};

struct AttentionShape {
  size_t num_heads = 0;     // q heads (this rank's)
  size_t num_kv_heads = 0;  // kv heads (this rank's); num_heads % num_kv_heads == 0
  size_t head_dim = 0;
  size_t block_size = 0;
  float scale = 0;  // usually 1/sqrt(head_dim)
};

// out[t, h*head_dim + d] = Σ_p softmax_p(scale · q_t,h · k_p,g) · v_p,g[d], g = h /
// (heads/kv_heads), p ≤ position of t. q: f32 [*, ldq]; out: f32 [*, ldo]. Scores, softmax and sums
// in f32 (K and V are read from bf16 or FP8). Work is split over (sequence, kv head, query tile)
// (a decode sequence's kv heads together), and a long sequence with few queries (decode) also
// over key ranges, combined at the end.
void Attention(const float* q, size_t ldq, std::span<const AttentionSeq> seqs,
               const AttentionShape& shape, float* out, size_t ldo, KernelContext& ctx);

// Into how many key ranges Attention on a pool of `threads` threads splits the work of sequence
// `seq` (1: not split; see attention.cc). For tests and benchmarks.
size_t AttentionKeySplits(std::span<const AttentionSeq> seqs, const AttentionShape& shape,
                          size_t threads, size_t seq);

void AttentionReference(const float* q, size_t ldq, std::span<const AttentionSeq> seqs,
                        const AttentionShape& shape, float* out, size_t ldo);

}  // namespace moeserve::kernels
