// Pieces the AVX-512 attention tile (attention_avx512bf16.cc) and the AMX one (attention_amx.cc)
// share: include after <immintrin.h> and kernels/internal.h, in a TU built with -mavx512f.
// static inline: every TU gets its own copy, compiled with its own flags.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/internal.h"

namespace moeserve::kernels {

// K and V rows of key positions [from, to) of a work item's kv head, and an FP8 cache's row
// scales, requested into L2 (T1): cache blocks are scattered, so the hardware prefetchers cannot
// see them coming; T1 holds fewer L1 miss buffers and leaves L1 to the tile's working set.
static inline void PrefetchKvRows(const AttentionTileArgs& a, size_t from, size_t to) {
  const size_t d = a.head_dim, bs = a.block_size;
  const size_t row_bytes = a.k_blocks8 ? d : 2 * d;
  for (size_t pos = from; pos < to; ++pos) {
    const size_t blk = pos / bs, at = (pos % bs) * a.num_kv_heads + a.kv_head;
    const char* kr = a.k_blocks8 ? reinterpret_cast<const char*>(a.k_blocks8[blk] + at * d)
                                 : reinterpret_cast<const char*>(a.k_blocks[blk] + at * d);
    const char* vr = a.k_blocks8 ? reinterpret_cast<const char*>(a.v_blocks8[blk] + at * d)
                                 : reinterpret_cast<const char*>(a.v_blocks[blk] + at * d);
#pragma GCC unroll 8
    for (size_t off = 0; off < row_bytes; off += 64) {
      _mm_prefetch(kr + off, _MM_HINT_T1);
      _mm_prefetch(vr + off, _MM_HINT_T1);
    }
    if (a.k_blocks8) {
      _mm_prefetch(reinterpret_cast<const char*>(a.k_blocks8[blk] + a.scale_offset) + at * 4,
                   _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(a.v_blocks8[blk] + a.scale_offset) + at * 4,
                   _MM_HINT_T1);
    }
  }
}

// 16 e4m3 codes (one per dword of c) -> their exact f32 values: the code's 7 magnitude bits at
// the top of an f32's exponent and mantissa are value · 2^-120 (subnormal codes become f32
// subnormals, also exact), × 2^120 restores it; the sign bit moves to bit 31.
static inline __m512 E4m3ToF32(__m512i c) {
  const __m512i bits =
      _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x7f)), 20),
                      _mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x80)), 24));
  return _mm512_mul_ps(_mm512_castsi512_ps(bits), _mm512_set1_ps(0x1p120f));
}

}  // namespace moeserve::kernels
