// Causal GQA attention over a paged bf16 KV cache.
//
// Work item = (sequence, kv head, tile of up to kQueryTile queries). An item handles the tile's
// queries for all `group` q heads that share the kv head, so each K/V row is widened from bf16 once
// and reused group × tile times. Keys are visited one cache block at a time with an online
// (streaming) softmax: scores for the block, running max / sum rescaled, V accumulated.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"

namespace moeserve::kernels {
namespace {

constexpr size_t kQueryTile = 16;

void CheckShape(std::span<const AttentionSeq> seqs, const AttentionShape& s, size_t ldq,
                size_t ldo) {
  MOESERVE_CHECK(s.num_kv_heads > 0 && s.num_heads % s.num_kv_heads == 0, "heads ", s.num_heads,
                 " kv heads ", s.num_kv_heads);
  MOESERVE_CHECK(s.head_dim > 0 && s.block_size > 0, "head_dim ", s.head_dim, " block_size ",
                 s.block_size);
  MOESERVE_CHECK(ldq >= s.num_heads * s.head_dim && ldo >= s.num_heads * s.head_dim, "ldq ", ldq,
                 " ldo ", ldo);
  for (const AttentionSeq& q : seqs)
    MOESERVE_CHECK(q.q_len <= q.kv_len, "q_len ", q.q_len, " > kv_len ", q.kv_len);
}

float Dot(const float* a, const float* b, size_t n) {
  float part[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) part[j] += a[i + j] * b[i + j];
  for (; i < n; ++i) part[i % 8] += a[i] * b[i];
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

struct Scratch {
  std::vector<float> k, v;    // [block_size, head_dim] widened K/V rows of one block
  std::vector<float> scores;  // [rows, block_size]
  std::vector<float> acc;     // [rows, head_dim]
  std::vector<float> max, sum;
};

struct Item {
  size_t seq, kv_head, q0, q1;  // queries [q0, q1) of the sequence (local indices)
};

void RunItem(const float* q, size_t ldq, const AttentionSeq& sq, const AttentionShape& s,
             const Item& it, float* out, size_t ldo, Scratch& sc) {
  const size_t d = s.head_dim, group = s.num_heads / s.num_kv_heads, bs = s.block_size;
  const size_t nq = it.q1 - it.q0, rows = nq * group;
  const size_t first_pos = sq.kv_len - sq.q_len;  // position of local query 0
  const size_t kv_end = first_pos + it.q1;        // keys [0, kv_end) matter to this tile
  sc.k.resize(bs * d);
  sc.v.resize(bs * d);
  sc.scores.resize(rows * bs);
  sc.acc.assign(rows * d, 0.0f);
  sc.max.assign(rows, -std::numeric_limits<float>::infinity());
  sc.sum.assign(rows, 0.0f);
  // Row r = (query i, head-in-group g): i = r / group.
  auto qrow = [&](size_t r) {
    const size_t i = it.q0 + r / group, h = it.kv_head * group + r % group;
    return q + (sq.q_begin + i) * ldq + h * d;
  };
  for (size_t b0 = 0; b0 < kv_end; b0 += bs) {
    const size_t nk = std::min(bs, kv_end - b0);
    const bf16* kb = sq.k_blocks[b0 / bs] + it.kv_head * d;
    const bf16* vb = sq.v_blocks[b0 / bs] + it.kv_head * d;
    for (size_t p = 0; p < nk; ++p)
      for (size_t j = 0; j < d; ++j) {
        sc.k[p * d + j] = Bf16ToF32(kb[p * s.num_kv_heads * d + j]);
        sc.v[p * d + j] = Bf16ToF32(vb[p * s.num_kv_heads * d + j]);
      }
    for (size_t r = 0; r < rows; ++r) {
      const size_t pos = first_pos + it.q0 + r / group;
      if (b0 > pos) continue;
      const size_t n_valid = std::min(nk, pos - b0 + 1);
      const float* qr = qrow(r);
      float* sr = sc.scores.data() + r * bs;
      float block_max = -std::numeric_limits<float>::infinity();
      for (size_t p = 0; p < n_valid; ++p) {
        sr[p] = s.scale * Dot(qr, sc.k.data() + p * d, d);
        block_max = std::max(block_max, sr[p]);
      }
      const float new_max = std::max(sc.max[r], block_max);
      const float correction = std::exp(sc.max[r] - new_max);
      float* ar = sc.acc.data() + r * d;
      if (correction != 1.0f)
        for (size_t j = 0; j < d; ++j) ar[j] *= correction;
      float block_sum = 0;
      for (size_t p = 0; p < n_valid; ++p) {
        const float e = std::exp(sr[p] - new_max);
        block_sum += e;
        const float* vr = sc.v.data() + p * d;
        for (size_t j = 0; j < d; ++j) ar[j] += e * vr[j];
      }
      sc.sum[r] = sc.sum[r] * correction + block_sum;
      sc.max[r] = new_max;
    }
  }
  for (size_t r = 0; r < rows; ++r) {
    const size_t i = it.q0 + r / group, h = it.kv_head * group + r % group;
    float* o = out + (sq.q_begin + i) * ldo + h * d;
    const float inv = 1.0f / sc.sum[r];
    for (size_t j = 0; j < d; ++j) o[j] = sc.acc[r * d + j] * inv;
  }
}

}  // namespace

void Attention(const float* q, size_t ldq, std::span<const AttentionSeq> seqs,
               const AttentionShape& shape, float* out, size_t ldo, ThreadPool& pool) {
  CheckShape(seqs, shape, ldq, ldo);
  thread_local std::vector<Item> items;
  items.clear();
  for (size_t si = 0; si < seqs.size(); ++si)
    for (size_t q0 = 0; q0 < seqs[si].q_len; q0 += kQueryTile)
      for (size_t g = 0; g < shape.num_kv_heads; ++g)
        items.push_back({si, g, q0, std::min(seqs[si].q_len, q0 + kQueryTile)});
  // Longest tiles (latest queries see the most keys) first, for the dynamic scheduler's balance.
  std::stable_sort(items.begin(), items.end(), [&](const Item& a, const Item& b) {
    const size_t ka = seqs[a.seq].kv_len - seqs[a.seq].q_len + a.q1;
    const size_t kb = seqs[b.seq].kv_len - seqs[b.seq].q_len + b.q1;
    return ka > kb;
  });
  std::vector<Item>& work = items;
  pool.ParallelForDynamic(work.size(), [&](size_t i, size_t) {
    thread_local Scratch scratch;
    const Item& it = work[i];
    RunItem(q, ldq, seqs[it.seq], shape, it, out, ldo, scratch);
  });
}

void AttentionReference(const float* q, size_t ldq, std::span<const AttentionSeq> seqs,
                        const AttentionShape& shape, float* out, size_t ldo) {
  CheckShape(seqs, shape, ldq, ldo);
  const size_t d = shape.head_dim, group = shape.num_heads / shape.num_kv_heads;
  const size_t bs = shape.block_size;
  std::vector<float> scores;
  for (const AttentionSeq& sq : seqs) {
    for (size_t i = 0; i < sq.q_len; ++i) {
      const size_t pos = sq.kv_len - sq.q_len + i;
      scores.assign(pos + 1, 0.0f);
      for (size_t h = 0; h < shape.num_heads; ++h) {
        const size_t g = h / group;
        const float* qv = q + (sq.q_begin + i) * ldq + h * d;
        auto kv_at = [&](const bf16* const* blocks, size_t p, size_t j) {
          return Bf16ToF32(blocks[p / bs][(p % bs) * shape.num_kv_heads * d + g * d + j]);
        };
        float mx = -std::numeric_limits<float>::infinity();
        for (size_t p = 0; p <= pos; ++p) {
          float dot = 0;
          for (size_t j = 0; j < d; ++j) dot += qv[j] * kv_at(sq.k_blocks, p, j);
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
          for (size_t p = 0; p <= pos; ++p) acc += scores[p] * kv_at(sq.v_blocks, p, j);
          o[j] = acc / total;
        }
      }
    }
  }
}

}  // namespace moeserve::kernels
