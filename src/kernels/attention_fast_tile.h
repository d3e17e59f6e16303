// The vector attention tile's walk over keys (FastTile), written once for every vector width: the
// AVX-512 TU (attention_avx512.cc, 16 keys per chunk) and the AVX2 one (attention_avx2.cc, 8)
// include it INSIDE their anonymous namespace, after defining, for their width:
//   constexpr size_t kKeys;             keys per chunk: one score vector
//   constexpr size_t kScoreChunks;      chunks per step, whose scores one pass computes (1 .. 4)
//   constexpr size_t kDecodeChunks;     the same for tiles of at most kDirectPvRows rows
//   constexpr size_t kQkRows, kPvRows;  rows per score pass / per P·V pass
//   constexpr size_t kPrefetchChunks;   K/V rows this many chunks ahead into L2
//   void Widen(const bf16*, float*, size_t);  void WidenFp8(const uint8_t*, float, float*, size_t);
//   void TransposeKeysBf16(const bf16* const rows[kKeys], size_t nk, size_t d, float* kt);
//   void TransposeKeysFp8(const uint8_t* const rows[kKeys], const float* scales, size_t nk,
//                         size_t d, float* kt, const uint8_t* const* v_pf);
//                                       kt[j][p] = K[p][j] as f32, keys p >= nk zero; the FP8
//                                       one requests the nk V rows v_pf (if not null) into L1
//                                       (with kDirectFp8 it must: FastTile requests them nowhere
//                                       else)
//   template <int kRows, int kChunks> void Scores(const float* const* q, const float* kt, size_t d,
//                                                 float* s);
//                                       s[c][r][p] = q[r] · K[c][p] for kRows ≤ kQkRows = 8 rows
//                                       and kChunks ≤ kScoreChunks chunks (kt + c · d · kKeys,
//                                       s + c · kQkRows · kKeys) (the rows unrolled)
//   float SoftmaxRow(const float* s, size_t chunks, size_t n_valid, float scale, float& max,
//                    float& sum, float* p);
//                                       one row's step over `chunks` score vectors (chunk c's
//                                       at s + c · kQkRows · kKeys): p = e^(scale · s − max') on
//                                       keys [0, n_valid), zero past them; max and sum updated;
//                                       returns the correction e^(max − max') of the old sums
//   void AccumulatePvN(size_t n, float* const* acc, const float* corr, const float* p,
//                      size_t ldp, const float* v, size_t ldv, size_t n_keys, size_t d);
//                                       acc[r] = acc[r] · corr[r] + Σ_k p[r][k] · v[k]
//   void StoreRowScaled(const float* acc, float inv, float* out, size_t d);   out = acc · inv
//   constexpr size_t kDirectPvRows, kPairBlock;
//   void AccumulatePvBf16N(size_t n, float* const* acc, const float* corr, const float* p,
//                          size_t ldp, const bf16* const* v_rows, size_t n_keys, size_t d);
//   void StoreRowScaledPairSplit(const float* acc, float inv, float* out, size_t d);
//                                       a bf16 tile of at most kDirectPvRows rows per kv head
//                                       (decode) with d % kPairBlock == 0 skips the V widening:
//                                       P.V widens the rows of V in registers, each kPairBlock
//                                       dims into their even and odd halves, so its acc rows hold
//                                       each block's even dims, then its odd ones, restored when
//                                       stored
//   constexpr bool kQkFromRows; constexpr kQkRowsBf16 = a function (size_t n, const float*
//       const* q, const bf16* const* rows, const bf16* const* v_pf, size_t d, float* s) if
//       kQkFromRows (else null):
//                                       a decode tile's scores (direct P.V, bf16 cache,
//                                       d % 32 == 0) straight from one chunk's kKeys K rows,
//                                       without TransposeKeysBf16's kt: s[r] = q[r] · K for
//                                       n ≤ kQkRows rows, kKeys floats apart; requests the
//                                       chunk's kKeys V rows v_pf (if not null) into L1
//   constexpr bool kDirectFp8; constexpr size_t kFp8Block; constexpr kPvFp8 = a function
//       (size_t n, float* const* acc, const float* corr, const float* p, size_t ldp,
//        const uint8_t* const* v_rows, const float* v_scales, size_t n_keys, size_t d) if
//       kDirectFp8 (else null):
//                                       the same for an FP8 cache (d % kFp8Block == 0), V rows
//                                       decoded in registers as WidenFp8 writes them, acc rows
//                                       in the plain layout
// and after <cmath>, kernels/internal.h and kernels/attention_prefetch.h.
//
// An item of several kv heads (decode) takes each step for every head in turn. Per chunk of
// kKeys consecutive positions (spanning cache blocks of any size), for all rows of a kv head
// (row = query of the tile x q head of the kv head's group): K transposed once and
// V widened once, shared by every row; scores by broadcast FMAs (no horizontal sums); the online
// softmax per row on its score vector; P·V into the rows' f32 accumulators. The keys are walked in
// steps of kScoreChunks chunks: one score pass loads each broadcast of q for that many score
// vectors (AVX-512: 2 vectors x 8 rows, 16 FMAs per 10 loads instead of 8 per 9, where the pass
// was bound by its loads; AVX2 the same 4 rows at a time), and one softmax step (one horizontal
// max and sum, one correction) and one P·V pass (each accumulator loaded, rescaled and stored
// once) cover the step's keys. bench_attention, avx512, one core (Ice Lake), prefill 512 best of
// 7: 43-44 ms with 16-key steps, 35-39 with the two-chunk score pass alone, 32-33 with the whole
// step (AVX2: attention_avx2.cc).
// Numerics as the generic tile (attention_tile.h) and AttentionReference: q, scores, softmax and
// sums in f32, K and V dequantized exactly; only the summation order and the vector exp differ.
namespace {

static_assert(kQkRows == 8, "ScoresN dispatches Scores<1> .. Scores<8>");
static_assert(kScoreChunks >= 1 && kScoreChunks <= 4, "ScoresN dispatches 1 .. 4 chunks");
static_assert(kDecodeChunks >= 1 && kDecodeChunks <= kScoreChunks, "decode steps: 1 .. max chunks");

template <int kChunks>
inline void ScoresRows(size_t n, const float* const* q, const float* kt, size_t d, float* out) {
  switch (n) {
    case 1:
      return Scores<1, kChunks>(q, kt, d, out);
    case 2:
      return Scores<2, kChunks>(q, kt, d, out);
    case 3:
      return Scores<3, kChunks>(q, kt, d, out);
    case 4:
      return Scores<4, kChunks>(q, kt, d, out);
    case 5:
      return Scores<5, kChunks>(q, kt, d, out);
    case 6:
      return Scores<6, kChunks>(q, kt, d, out);
    case 7:
      return Scores<7, kChunks>(q, kt, d, out);
    default:
      return Scores<8, kChunks>(q, kt, d, out);
  }
}

// Scores of n rows over `chunks` (1 .. kScoreChunks) chunks.
inline void ScoresN(size_t n, size_t chunks, const float* const* q, const float* kt, size_t d,
                    float* out) {
  if constexpr (kScoreChunks > 3)
    if (chunks > 3) return ScoresRows<4>(n, q, kt, d, out);
  if constexpr (kScoreChunks > 2)
    if (chunks > 2) return ScoresRows<3>(n, q, kt, d, out);
  if constexpr (kScoreChunks > 1)
    if (chunks > 1) return ScoresRows<2>(n, q, kt, d, out);
  ScoresRows<1>(n, q, kt, d, out);
}

// kChunks: chunks per step (kDecodeChunks for tiles of at most kDirectPvRows rows per kv head,
// else kScoreChunks; see AttentionTile).
template <size_t kD, size_t kChunks>
void FastTile(const AttentionTileArgs& a) {
  const size_t d = kD ? kD : a.head_dim, bs = a.block_size, group = a.group;
  const size_t rows = (a.q1 - a.q0) * group;  // per kv head
  // Keys [a.key0, kv_end) matter to this tile.
  const size_t kv_end = a.first_pos + a.q1 < a.key1 ? a.first_pos + a.q1 : a.key1;
  const size_t ldv = (d + kKeys - 1) / kKeys * kKeys;
  // Few rows (decode): P.V reads V rows straight (a bf16 cache's acc rows pair-split).
  const bool fp8 = a.k_blocks8 != nullptr;
  const bool direct_v =
      rows <= kDirectPvRows && (fp8 ? kDirectFp8 && d % kFp8Block == 0 : d % kPairBlock == 0);
  // Decode over a bf16 cache where the ISA has it: scores straight from the K rows, kt unused.
  const bool qk_rows = kQkFromRows && direct_v && !fp8 && d % 32 == 0;
  for (size_t r = 0; r < a.kv_heads * rows; ++r) {
    a.max[r] = -INFINITY;
    a.sum[r] = 0.0f;
    for (size_t j = 0; j < d; ++j) a.acc[r * d + j] = 0.0f;
  }
  // The chunk scratch, K^T [kChunks][d][kKeys] then V [kChunks · kKeys][ldv], from the worker's
  // tile scratch (64-byte aligned; K^T's size is a multiple of 64 bytes). It had been
  // thread_local: every thread of the process (the HTTP server's too) carried it.
  const size_t kt_floats = kChunks * d * kKeys;
  float* const kt =
      static_cast<float*>(a.tile_scratch->Get((kt_floats + kChunks * kKeys * ldv) * sizeof(float)));
  float* const v = kt + kt_floats;
  const bf16* k_rows[kKeys];
  const uint8_t* k_rows8[kKeys];
  const bf16* k_rows_step[kChunks * kKeys];  // scores from rows: the step's K rows
  const bf16* v_rows[kChunks * kKeys];       // direct P.V: the step's V rows
  const uint8_t* v_rows8[kChunks * kKeys];   // (an FP8 cache's, with their scales)
  alignas(64) float v_scales[kChunks * kKeys];
  alignas(64) float k_scales[kKeys];
  alignas(64) float s[kChunks * kQkRows * kKeys];
  alignas(64) float p[kQkRows * kChunks * kKeys];
  float corr[kQkRows];
  const float* q_rows[kQkRows];
  float* acc_rows[kQkRows];
  constexpr size_t kStep = kChunks * kKeys;  // keys per step: one score pass, one softmax
  // K/V rows requested a step ahead, at least kPrefetchChunks chunks.
  constexpr size_t kAhead = kStep > kPrefetchChunks * kKeys ? kStep : kPrefetchChunks * kKeys;
  for (size_t c0 = a.key0; c0 < kv_end; c0 += kStep) {
    const size_t step_keys = MinSize(kStep, kv_end - c0);
    const size_t chunks = (step_keys + kKeys - 1) / kKeys;
    // Rows are ordered by query, so the rows that see any key of this step are a suffix.
    const size_t i_first = c0 > a.first_pos + a.q0 ? c0 - a.first_pos : a.q0;
    const size_t r_first = (i_first - a.q0) * group;
    const size_t pf0 = c0 + kAhead;
    // The item's kv heads take the step in turn (decode: all of a sequence's, so that the step
    // reads whole cache rows; see attention.cc).
    for (size_t hh = 0; hh < a.kv_heads; ++hh) {
      const size_t kv_head = a.kv_head + hh;
      float* const acc = a.acc + hh * rows * d;
      float* const max = a.max + hh * rows;
      float* const sum = a.sum + hh * rows;
      if (pf0 < kv_end) PrefetchKvRows(a, kv_head, pf0, MinSize(pf0 + kStep, kv_end));
      for (size_t c = 0; c < chunks; ++c) {
        const size_t k0 = c0 + c * kKeys, nk = MinSize(kKeys, kv_end - k0);
        float* const vc = v + c * kKeys * ldv;
        float* const ktc = kt + c * d * kKeys;
        PositionCursor cur(k0, bs);
        for (size_t k = 0; k < nk; ++k, cur.Next(bs)) {
          const size_t blk = cur.block, at = cur.row * a.num_kv_heads + kv_head;
          if (a.k_blocks8) {
            const uint8_t* kb = a.k_blocks8[blk];
            const uint8_t* vb = a.v_blocks8[blk];
            k_rows8[k] = kb + at * d;
            k_scales[k] = reinterpret_cast<const float*>(kb + a.scale_offset)[at];
            const float v_scale = reinterpret_cast<const float*>(vb + a.scale_offset)[at];
            if (direct_v) {
              v_rows8[c * kKeys + k] = vb + at * d;
              v_scales[c * kKeys + k] = v_scale;
              continue;
            }
            WidenFp8(vb + at * d, v_scale, vc + k * ldv, d);
          } else if (direct_v) {
            k_rows[k] = k_rows_step[c * kKeys + k] = a.k_blocks[blk] + at * d;
            v_rows[c * kKeys + k] = a.v_blocks[blk] + at * d;
            continue;
          } else {
            k_rows[k] = a.k_blocks[blk] + at * d;
            Widen(a.v_blocks[blk] + at * d, vc + k * ldv, d);
          }
          if (ldv != d)  // P.V's tail reads whole vectors: keep the padding finite
            for (size_t j = d; j < ldv; ++j) vc[k * ldv + j] = 0.0f;
        }
        if (qk_rows)  // past the chunk's keys, its last row again (masked by the softmax)
          for (size_t k = nk; k < kKeys; ++k) {
            k_rows_step[c * kKeys + k] = k_rows[nk - 1];
            v_rows[c * kKeys + k] = v_rows[c * kKeys + nk - 1];
          }
        else if (a.k_blocks8)
          TransposeKeysFp8(k_rows8, k_scales, nk, d, ktc, direct_v ? v_rows8 + c * kKeys : nullptr);
        else
          TransposeKeysBf16(k_rows, nk, d, ktc);
        // The chunk's V rows into L1 now, behind its K rows: P.V reads them after the scores and
        // the softmax (from DRAM, V rows read only there stalled P.V: decode ~20% slower). Scores
        // from K rows and the FP8 transpose request them themselves, spread over their blocks.
        if (direct_v && !qk_rows && !fp8)
          for (size_t k = 0; k < nk; ++k)
            for (size_t off = 0; off < 2 * d; off += 64)
              _mm_prefetch(reinterpret_cast<const char*>(v_rows[c * kKeys + k]) + off, _MM_HINT_T0);
      }

      for (size_t r0 = r_first; r0 < rows; r0 += kQkRows) {
        const size_t nr = rows - r0 < kQkRows ? rows - r0 : kQkRows;
        for (size_t r = 0; r < nr; ++r) {
          const size_t i = a.q0 + (r0 + r) / group, h = kv_head * group + (r0 + r) % group;
          q_rows[r] = a.q + i * a.ldq + h * d;
          acc_rows[r] = acc + (r0 + r) * d;
        }
        if (qk_rows)
          for (size_t c = 0; c < chunks; ++c)
            kQkRowsBf16(nr, q_rows, k_rows_step + c * kKeys,
                        r0 == r_first ? v_rows + c * kKeys : nullptr, d, s + c * kQkRows * kKeys);
        else
          ScoresN(nr, chunks, q_rows, kt, d, s);
        size_t n_valid[kQkRows];
        for (size_t r = 0; r < nr; ++r) {
          const size_t i = a.q0 + (r0 + r) / group;
          const size_t seen = a.first_pos + i - c0 + 1;  // ≥ 1: the row sees key c0
          n_valid[r] = MinSize(seen, step_keys);
          corr[r] = SoftmaxRow(s + r * kKeys, chunks, n_valid[r], a.scale, max[r0 + r], sum[r0 + r],
                               p + r * kStep);
        }
        // Later rows see at least as many keys; rows past their own causal end carry p = 0.
        if constexpr (kDirectFp8)
          if (direct_v && fp8) {
            kPvFp8(nr, acc_rows, corr, p, kStep, v_rows8, v_scales, n_valid[nr - 1], d);
            continue;
          }
        if (direct_v) {
          AccumulatePvBf16N(nr, acc_rows, corr, p, kStep, v_rows, n_valid[nr - 1], d);
          continue;
        }
        for (size_t r = 0; r < nr; r += kPvRows) {
          const size_t n = nr - r < kPvRows ? nr - r : kPvRows;
          AccumulatePvN(n, acc_rows + r, corr + r, p + r * kStep, kStep, v, ldv, n_valid[r + n - 1],
                        d);
        }
      }
    }
  }
  for (size_t hh = 0; hh < a.kv_heads; ++hh)
    for (size_t r = 0; r < rows; ++r) {
      const size_t i = a.q0 + r / group, h = (a.kv_head + hh) * group + r % group;
      const size_t at = hh * rows + r;
      float* const out = a.out + i * a.ldo + h * d;
      if (direct_v && !fp8)
        StoreRowScaledPairSplit(a.acc + at * d, 1.0f / a.sum[at], out, d);
      else
        StoreRowScaled(a.acc + at * d, 1.0f / a.sum[at], out, d);
      if (a.part_max) a.part_max[at] = a.max[at], a.part_sum[at] = a.sum[at];
    }
}

}  // namespace
