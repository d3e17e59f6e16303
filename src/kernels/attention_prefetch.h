// The attention tiles' walk over cache positions (PositionCursor) and their K/V prefetch (SSE
// prefetch instructions only: every x86 ISA's attention TU includes it, after kernels/internal.h).
// static inline: every TU gets its own copy, compiled with its own flags.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/internal.h"

namespace moeserve::kernels {

// Walks cache positions in order without a division per key: the block and the row in it (the
// AMX tile's, the vector tile's and the prefetch's walks; the vector tile's two divisions per key
// had cost nothing measurable: bench_attention one core, within noise either way).
struct PositionCursor {
  size_t block, row;
  PositionCursor(size_t pos, size_t bs) : block(pos / bs), row(pos % bs) {}
  void Next(size_t bs) {
    if (++row == bs) row = 0, ++block;
  }
};

// K and V rows of key positions [from, to) of kv head `kv_head`, and an FP8 cache's row
// scales, requested into L2 (T1): cache blocks are scattered, so the hardware prefetchers cannot
// see them coming; T1 holds fewer L1 miss buffers and leaves L1 to the tile's working set.
static inline void PrefetchKvRows(const AttentionTileArgs& a, size_t kv_head, size_t from,
                                  size_t to) {
  const size_t d = a.head_dim, bs = a.block_size;
  const size_t row_bytes = a.k_blocks8 ? d : 2 * d;
  for (PositionCursor cur(from, bs); from < to; ++from, cur.Next(bs)) {
    const size_t blk = cur.block, at = cur.row * a.num_kv_heads + kv_head;
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

}  // namespace moeserve::kernels
