// Causal GQA attention over a paged bf16 or FP8 KV cache.
//
// Work item = (sequence, kv head, tile of up to kQueryTile queries). An item handles the tile's
// queries for all `group` q heads that share the kv head, so each K/V row is widened from bf16 once
// and reused group × tile times. Keys are visited one cache block at a time with an online
// (streaming) softmax: scores for the block, running max / sum rescaled, V accumulated. A decode
// sequence's items take all its kv heads instead (kDecodeRows; fewer when that would idle
// threads): with a few rows per kv head the step is bound by reading K and V, and the cache's
// rows are then read whole.
//
// Split KV (flash decoding): a decode step has one item per sequence (or per few kv heads, when
// the call has few sequences for its threads: MakeCut), however many threads the rank has, and
// one long sequence's items set a batch's time. So items longer than a fair share of the call's
// keys x kv heads (total / (2 · threads), at least kSplitMinKeys keys) are split into key ranges;
// each writes its normalized partial output with its rows' max and sum, and a combine step weighs
// the splits by sum · e^(max − M). Only tiles of sequences with at most kQueryTile queries are
// split (every row then sees a key of every range). The split depends on the call (the pool's
// thread count and the other sequences' lengths): the results are the same for the same call and
// pool, and a split sequence's differ from its unsplit ones by f32 summation order, as a batch's
// numerics do in any batching engine.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/check.h"
#include "kernels/internal.h"
#include "kernels/isa_kernels.h"
#include "kernels/quant.h"

namespace moeserve::kernels {
namespace {

constexpr size_t kQueryTile = 16;
// A sequence with at most this many rows per kv head (q_len · group: decode) has items that take
// all its kv heads (AttentionTileArgs::kv_heads), one step of keys for every head before the next
// step: the step then reads whole cache rows (all kv heads of its positions) instead of one
// head's 256-byte slice of every 2 KB (MiniMax-M2, 8 kv heads). Ice Lake, one core, K and V of
// 8 x 4096 positions from DRAM touched in the tile's order without computing: 6.3-8.5 GB/s a
// head at a time, 9.7-12.0 all heads per step (the hardware prefetchers see whole rows).
constexpr size_t kDecodeRows = 8;
constexpr size_t kSplitMinKeys = 512;  // keys per split range, at least
constexpr size_t kSplitAlign = 64;     // split boundaries: multiples of the AMX tile's key chunk

void CheckShape(std::span<const AttentionSeq> seqs, const AttentionShape& s, size_t ldq,
                size_t ldo) {
  MOESERVE_CHECK(s.num_kv_heads > 0 && s.num_heads % s.num_kv_heads == 0, "heads ", s.num_heads,
                 " kv heads ", s.num_kv_heads);
  MOESERVE_CHECK(s.head_dim > 0 && s.block_size > 0, "head_dim ", s.head_dim, " block_size ",
                 s.block_size);
  MOESERVE_CHECK(ldq >= s.num_heads * s.head_dim && ldo >= s.num_heads * s.head_dim, "ldq ", ldq,
                 " ldo ", ldo);
  const bool fp8 = !seqs.empty() && seqs[0].k_blocks8;
  for (const AttentionSeq& q : seqs) {
    MOESERVE_CHECK(q.q_len <= q.kv_len, "q_len ", q.q_len, " > kv_len ", q.kv_len);
    const bool bf16_tables = q.k_blocks && q.v_blocks, fp8_tables = q.k_blocks8 && q.v_blocks8;
    MOESERVE_CHECK(q.kv_len == 0 || (fp8 ? fp8_tables && !q.k_blocks && !q.v_blocks
                                         : bf16_tables && !q.k_blocks8 && !q.v_blocks8),
                   "attention: each sequence needs the K and V block tables of one cache format, "
                   "the same for every sequence of a call");
  }
}

// Baseline primitives for the scalar path (8 partial sums: vectorisable without reassociation).
float Dot(const float* a, const float* b, size_t n) {
  float part[8] = {};
  const size_t full = n / 8 * 8;  // (a tail loop from a counter GCC warns about at constant n)
  for (size_t i = 0; i < full; i += 8)
    for (int j = 0; j < 8; ++j) part[j] += a[i + j] * b[i + j];
  for (size_t i = full; i < n; ++i) part[i % 8] += a[i] * b[i];
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}
void Axpy(float alpha, const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}
void Scale(float* y, float s, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] *= s;
}
void Widen(const bf16* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Bf16ToF32(src[i]);
}
void WidenFp8(const uint8_t* src, float scale, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = E4M3ToFloat(src[i]) * scale;
}

#include "kernels/attention_tile.h"

struct Item {
  size_t seq, kv_head, q0, q1;       // queries [q0, q1) of the sequence (local indices)
  size_t key0 = 0, key1 = SIZE_MAX;  // keys of a split item, else all
  size_t part = 0;                   // a split item: the index of its key range
  size_t kv_heads = 1;               // kv heads [kv_head, kv_head + kv_heads)
};

// How a call's work is cut into items: the share of keys x kv heads an item may take before it is
// split into key ranges (SplitShare), and the kv heads of a decode item (MakeCut).
struct Cut {
  size_t share, decode_heads;
};

// The kv heads one item of the sequence takes: cut.decode_heads for decode (kDecodeRows), else one.
size_t HeadsPerItem(const AttentionSeq& sq, const AttentionShape& s, const Cut& cut) {
  const size_t group = s.num_heads / s.num_kv_heads;
  return sq.q_len > 0 && sq.q_len * group <= kDecodeRows ? cut.decode_heads : 1;
}

// The splits of one sequence's tile: `splits` key ranges over [0, keys), boundaries multiples of
// kSplitAlign not past `first_key` (the first query's position: every row sees every range).
struct SplitPlan {
  size_t seq, splits, keys, first_key;
  size_t Bound(size_t j) const {  // boundary j of splits + 1
    if (j == 0) return 0;
    if (j == splits) return keys;
    return (j * (first_key + 1) / splits) / kSplitAlign * kSplitAlign;
  }
};

// A tile's K and V rows widened to f32 [bs, d] each, its scores [rows, bs], accumulators
// [rows, d] and running max and sum [rows], carved from one buffer (each part 64-byte aligned).
struct TileScratch {
  float *k, *v, *scores, *acc, *max, *sum;

  TileScratch(ScratchBuffer& buf, size_t bs, size_t d, size_t rows) {
    const size_t sizes[6] = {bs * d, bs * d, rows * bs, rows * d, rows, rows};
    size_t total = 0;
    for (size_t n : sizes) total += (n + 15) / 16 * 16;
    float* p = buf.As<float>(total);
    float** parts[6] = {&k, &v, &scores, &acc, &max, &sum};
    for (size_t i = 0; i < 6; ++i) {
      *parts[i] = p;
      p += (sizes[i] + 15) / 16 * 16;
    }
  }
};

// Where split items put their results: per sequence with splits, `splits` copies of its output
// rows ([q_len][num_heads · head_dim] each) and of its rows' max and sum ([q_len · num_heads],
// a kv head's rows (query − q0) · group + q head in the group together). One definition of the
// layout for the items that write it and the combine that reads it.
struct SplitParts {
  float* out = nullptr;
  float* max = nullptr;
  float* sum = nullptr;
  size_t q_len = 0, num_heads = 0, head_dim = 0, group = 0;

  size_t Width() const { return num_heads * head_dim; }
  // Key range `part`'s output rows ([q_len][Width()]).
  float* Out(size_t part) const { return out + part * q_len * Width(); }
  // Index into max / sum of key range `part`'s row 0 of kv head `kv_head`.
  size_t RowAt(size_t part, size_t kv_head) const {
    return part * q_len * num_heads + kv_head * q_len * group;
  }
};

void RunItem(const KernelContext& ctx, const float* q, size_t ldq, const AttentionSeq& sq,
             const AttentionShape& s, const Item& it, float* out, size_t ldo,
             const SplitParts* parts, ScratchBuffer& scratch, ScratchBuffer& tiles) {
  const size_t d = s.head_dim, group = s.num_heads / s.num_kv_heads, bs = s.block_size;
  // Sized for a whole tile or a decode item of all kv heads whatever this one's rows, so that a
  // thread's scratch does not depend on which items the dynamic schedule gave it.
  const TileScratch sc(scratch, bs, d, std::max(kQueryTile * group, kDecodeRows * s.num_kv_heads));
  AttentionTileArgs a{q + sq.q_begin * ldq,
                      ldq,
                      out + sq.q_begin * ldo,
                      ldo,
                      sq.k_blocks,
                      sq.v_blocks,
                      sq.k_blocks8,
                      sq.v_blocks8,
                      KvScaleOffsetFp8(bs, s.num_kv_heads, d),
                      sq.kv_len - sq.q_len,
                      it.q0,
                      it.q1,
                      it.kv_head,
                      group,
                      s.num_kv_heads,
                      d,
                      bs,
                      s.scale,
                      sc.k,
                      sc.v,
                      sc.scores,
                      sc.acc,
                      sc.max,
                      sc.sum,
                      &tiles};
  if (parts) {
    // A split item's output is its key range's copy of the sequence's rows (q0 = 0: one tile).
    a.out = parts->Out(it.part);
    a.ldo = parts->Width();
    a.part_max = parts->max + parts->RowAt(it.part, it.kv_head);
    a.part_sum = parts->sum + parts->RowAt(it.part, it.kv_head);
    a.key0 = it.key0;
    a.key1 = it.key1;
  }
  a.kv_heads = it.kv_heads;
  ctx.kernels().attention_tile(a);
}

// out rows of one split sequence's kv head from its splits' partial outputs: each split's rows
// weighed by sum · e^(max − M), M the largest max of the row.
void CombineSplits(const AttentionSeq& sq, const AttentionShape& s, size_t kv_head, size_t splits,
                   const SplitParts& parts, float* out, size_t ldo) {
  const size_t d = s.head_dim, group = s.num_heads / s.num_kv_heads;
  for (size_t r = 0; r < sq.q_len * group; ++r) {
    const size_t i = r / group, h = kv_head * group + r % group;
    float m = -std::numeric_limits<float>::infinity();
    for (size_t p = 0; p < splits; ++p) m = std::max(m, parts.max[parts.RowAt(p, kv_head) + r]);
    float total = 0;
    float* o = out + (sq.q_begin + i) * ldo + h * d;
    for (size_t j = 0; j < d; ++j) o[j] = 0.0f;
    for (size_t p = 0; p < splits; ++p) {
      const size_t at = parts.RowAt(p, kv_head) + r;
      const float w = parts.sum[at] * std::exp(parts.max[at] - m);
      total += w;
      const float* po = parts.Out(p) + i * parts.Width() + h * d;
      for (size_t j = 0; j < d; ++j) o[j] += w * po[j];
    }
    const float inv = 1.0f / total;
    for (size_t j = 0; j < d; ++j) o[j] *= inv;
  }
}

// A fair share of the call's keys for one item: total / (2 · threads), at least kSplitMinKeys.
size_t SplitShare(std::span<const AttentionSeq> seqs, const AttentionShape& shape, size_t threads) {
  size_t total_keys = 0;
  for (const AttentionSeq& sq : seqs)
    for (size_t q0 = 0; q0 < sq.q_len; q0 += kQueryTile)
      total_keys +=
          (sq.kv_len - sq.q_len + std::min(sq.q_len, q0 + kQueryTile)) * shape.num_kv_heads;
  return std::max(kSplitMinKeys, total_keys / (2 * threads) + 1);
}

// The key ranges of a sequence's items: one unless it has a single query tile and more keys (times
// the kv heads of an item) than the share; each range at least kSplitMinKeys keys before query 0's
// position.
size_t SplitCount(const AttentionSeq& sq, const AttentionShape& shape, const Cut& cut) {
  if (sq.q_len == 0 || sq.q_len > kQueryTile) return 1;
  const size_t by_share = (sq.kv_len * HeadsPerItem(sq, shape, cut) + cut.share - 1) / cut.share;
  const size_t by_keys = (sq.kv_len - sq.q_len + 1) / kSplitMinKeys;
  return std::max<size_t>(1, std::min(by_share, by_keys));
}

// The items of a call cut so.
size_t ItemCount(std::span<const AttentionSeq> seqs, const AttentionShape& shape, const Cut& cut) {
  size_t items = 0;
  for (const AttentionSeq& sq : seqs) {
    const size_t splits = SplitCount(sq, shape, cut);
    const size_t tiles = splits > 1 ? splits : (sq.q_len + kQueryTile - 1) / kQueryTile;
    items += tiles * shape.num_kv_heads / HeadsPerItem(sq, shape, cut);
  }
  return items;
}

// Decode items take all kv heads unless the call would then have fewer than 2 items per thread
// (a lone sequence with a short context, or many threads, where one kv head per item had kept
// them all busy): then half as many, and so on, down to one.
Cut MakeCut(std::span<const AttentionSeq> seqs, const AttentionShape& shape, size_t threads) {
  Cut cut{SplitShare(seqs, shape, threads), shape.num_kv_heads};
  while (cut.decode_heads % 2 == 0 && ItemCount(seqs, shape, cut) < 2 * threads)
    cut.decode_heads /= 2;
  return cut;
}

void AttentionImpl(const float* q, size_t ldq, std::span<const AttentionSeq> seqs,
                   const AttentionShape& shape, float* out, size_t ldo, KernelContext& ctx) {
  const Cut cut = MakeCut(seqs, shape, ctx.pool().num_threads());
  const size_t num_items = ItemCount(seqs, shape, cut);
  // Scratch: the plans (at most one per sequence), then each sequence's SplitParts.
  auto* split_mem = static_cast<char*>(
      ctx.call().attention_splits.Get(seqs.size() * (sizeof(SplitPlan) + sizeof(SplitParts))));
  SplitPlan* plans = reinterpret_cast<SplitPlan*>(split_mem);
  SplitParts* parts = reinterpret_cast<SplitParts*>(split_mem + seqs.size() * sizeof(SplitPlan));
  size_t num_plans = 0, part_floats = 0, part_rows = 0;
  for (size_t si = 0; si < seqs.size(); ++si) {
    const AttentionSeq& sq = seqs[si];
    const size_t splits = SplitCount(sq, shape, cut);
    if (splits < 2) continue;
    plans[num_plans++] = {si, splits, sq.kv_len, sq.kv_len - sq.q_len};
    part_floats += splits * sq.q_len * shape.num_heads * shape.head_dim;
    part_rows += splits * sq.q_len * shape.num_heads;
  }
  for (size_t si = 0; si < seqs.size(); ++si) parts[si] = SplitParts{};
  float* part_mem = ctx.call().attention_partials.As<float>(part_floats + 2 * part_rows);
  for (size_t pi = 0; pi < num_plans; ++pi) {
    const SplitPlan& pl = plans[pi];
    const size_t floats = pl.splits * seqs[pl.seq].q_len * shape.num_heads * shape.head_dim;
    const size_t rows = pl.splits * seqs[pl.seq].q_len * shape.num_heads;
    parts[pl.seq] = {part_mem,
                     part_mem + floats,
                     part_mem + floats + rows,
                     seqs[pl.seq].q_len,
                     shape.num_heads,
                     shape.head_dim,
                     shape.num_heads / shape.num_kv_heads};
    part_mem += floats + 2 * rows;
  }
  Item* items = ctx.call().attention_items.As<Item>(num_items);
  size_t n = 0;
  size_t plan = 0;
  for (size_t si = 0; si < seqs.size(); ++si) {
    const size_t heads = HeadsPerItem(seqs[si], shape, cut);
    if (plan < num_plans && plans[plan].seq == si) {
      const SplitPlan& pl = plans[plan++];
      for (size_t p = 0; p < pl.splits; ++p)
        for (size_t g = 0; g < shape.num_kv_heads; g += heads)
          items[n++] = {si, g, 0, seqs[si].q_len, pl.Bound(p), pl.Bound(p + 1), p, heads};
      continue;
    }
    for (size_t q0 = 0; q0 < seqs[si].q_len; q0 += kQueryTile)
      for (size_t g = 0; g < shape.num_kv_heads; g += heads)
        items[n++] = {si, g, q0, std::min(seqs[si].q_len, q0 + kQueryTile), 0, SIZE_MAX, 0, heads};
  }
  // Item length: the keys it visits, times its kv heads.
  auto keys_of = [&](const Item& it) {
    return (std::min(seqs[it.seq].kv_len - seqs[it.seq].q_len + it.q1, it.key1) - it.key0) *
           it.kv_heads;
  };
  MOESERVE_CHECK(n == num_items, "attention: ", n, " items made, ", num_items, " counted");
  // Longest tiles (latest queries see the most keys) first, for the dynamic scheduler's balance.
  std::stable_sort(items, items + num_items,
                   [&](const Item& a, const Item& b) { return keys_of(a) > keys_of(b); });
  ctx.pool().ParallelForDynamic(num_items, [&](size_t i, size_t thread) {
    const Item& it = items[i];
    WorkerScratch& w = ctx.worker(thread);
    const SplitParts* sp = parts[it.seq].out ? &parts[it.seq] : nullptr;
    RunItem(ctx, q, ldq, seqs[it.seq], shape, it, out, ldo, sp, w.attention, w.attention_tiles);
  });
  if (num_plans == 0) return;
  ctx.pool().ParallelForDynamic(num_plans * shape.num_kv_heads, [&](size_t i, size_t) {
    const SplitPlan& pl = plans[i / shape.num_kv_heads];
    CombineSplits(seqs[pl.seq], shape, i % shape.num_kv_heads, pl.splits, parts[pl.seq], out, ldo);
  });
}

void ReferenceImpl(const float* q, size_t ldq, std::span<const AttentionSeq> seqs,
                   const AttentionShape& shape, float* out, size_t ldo) {
  const size_t d = shape.head_dim, group = shape.num_heads / shape.num_kv_heads;
  const size_t bs = shape.block_size;
  std::vector<float> scores;
  const size_t scale_offset = KvScaleOffsetFp8(bs, shape.num_kv_heads, d);
  for (const AttentionSeq& sq : seqs) {
    for (size_t i = 0; i < sq.q_len; ++i) {
      const size_t pos = sq.kv_len - sq.q_len + i;
      scores.assign(pos + 1, 0.0f);
      for (size_t h = 0; h < shape.num_heads; ++h) {
        const size_t g = h / group;
        const float* qv = q + (sq.q_begin + i) * ldq + h * d;
        // The block table is chosen before it is indexed, never as `(is_k ? k : v)[p / bs]`: GCC
        // 12 rewrites a subscript of ?: into `is_k ? k[idx] : v[idx]` sharing ONE index tree, and
        // with -fsanitize=shift, integer-divide-by-zero or signed-integer-overflow (all part of
        // -fsanitize=undefined) that index holds a SAVE_EXPR of p which the gimplifier sets in the
        // K arm only: V reads used an uninitialised p and the wrong block, and this reference (not
        // the kernels) was wrong in the ASan + UBSan build (issue 14).
        auto kv_at = [&](bool is_k, size_t p, size_t j) {
          const size_t at = (p % bs) * shape.num_kv_heads + g;
          if (sq.k_blocks8) {
            const uint8_t* const* table = is_k ? sq.k_blocks8 : sq.v_blocks8;
            const uint8_t* block = table[p / bs];
            float scale;
            std::memcpy(&scale, block + scale_offset + at * sizeof(float), sizeof(float));
            return E4M3ToFloat(block[at * d + j]) * scale;
          }
          const bf16* const* table = is_k ? sq.k_blocks : sq.v_blocks;
          return Bf16ToF32(table[p / bs][at * d + j]);
        };
        float mx = -std::numeric_limits<float>::infinity();
        for (size_t p = 0; p <= pos; ++p) {
          float dot = 0;
          for (size_t j = 0; j < d; ++j) dot += qv[j] * kv_at(true, p, j);
          scores[p] = shape.scale * dot;
          mx = std::max(mx, scores[p]);
        }
        float total = 0;
        for (size_t p = 0; p <= pos; ++p) {
          scores[p] = std::exp(scores[p] - mx);
          total += scores[p];
        }
        float* o = out + (sq.q_begin + i) * ldo + h * d;
        for (size_t j = 0; j < d; ++j) {
          float acc = 0;
          for (size_t p = 0; p <= pos; ++p) acc += scores[p] * kv_at(false, p, j);
          o[j] = acc / total;
        }
      }
    }
  }
}

}  // namespace

void EachKvHead(const AttentionTileArgs& args, void (*tile)(const AttentionTileArgs&)) {
  const size_t rows = (args.q1 - args.q0) * args.group;
  for (size_t hh = 0; hh < args.kv_heads; ++hh) {
    AttentionTileArgs a = args;
    a.kv_head = args.kv_head + hh;
    a.kv_heads = 1;
    a.acc = args.acc + hh * rows * args.head_dim;
    a.max = args.max + hh * rows;
    a.sum = args.sum + hh * rows;
    if (args.part_max) {
      a.part_max = args.part_max + hh * rows;
      a.part_sum = args.part_sum + hh * rows;
    }
    tile(a);
  }
}

void AttentionTileScalar(const AttentionTileArgs& args) {
  EachKvHead(args, AttentionTileImpl);
}

void Attention(const float* q, size_t ldq, std::span<const AttentionSeq> seqs,
               const AttentionShape& shape, float* out, size_t ldo, KernelContext& ctx) {
  CheckShape(seqs, shape, ldq, ldo);
  AttentionImpl(q, ldq, seqs, shape, out, ldo, ctx);
}

size_t AttentionKeySplits(std::span<const AttentionSeq> seqs, const AttentionShape& shape,
                          size_t threads, size_t seq) {
  return SplitCount(seqs[seq], shape, MakeCut(seqs, shape, threads == 0 ? 1 : threads));
}

void AttentionReference(const float* q, size_t ldq, std::span<const AttentionSeq> seqs,
                        const AttentionShape& shape, float* out, size_t ldo) {
  CheckShape(seqs, shape, ldq, ldo);
  ReferenceImpl(q, ldq, seqs, shape, out, ldo);
}

}  // namespace moeserve::kernels
