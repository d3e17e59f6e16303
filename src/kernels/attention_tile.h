// One attention work item (sequence, kv head, query tile), written once over four vector
// primitives that the including TU defines before including this file, in its own namespace:
//   float Dot(const float* a, const float* b, size_t n);
//   void Axpy(float alpha, const float* x, float* y, size_t n);      // y += alpha · x
//   void Scale(float* y, float s, size_t n);                          // y *= s
//   void Widen(const bf16* src, float* dst, size_t n);                // dst = f32(src)
//   void WidenFp8(const uint8_t* src, float scale, float* dst, size_t n);  // e4m3(src) · scale
// Included by attention.cc (baseline) and the per-ISA TUs, INSIDE their namespace and after
// <cmath> and kernels/internal.h; everything here has internal linkage and uses no std templates,
// so no inline definition is shared between differently-flagged TUs.
//
// Math: for each row r = (query i, q head h of this kv head's group), keys are visited one cache
// block at a time with an online softmax: s_p = scale · q·k_p (p ≤ position of i),
// m' = max(m, max_p s_p), acc = acc · e^(m − m') + Σ_p e^(s_p − m') v_p, l likewise; out = acc / l.
namespace {

inline size_t MinSize(size_t a, size_t b) {
  return a < b ? a : b;
}
inline float MaxF(float a, float b) {
  return a > b ? a : b;
}

// kD: the head dim as a compile-time constant (0: a.head_dim at run time), so that the vector
// primitives' loops over it unroll (AttentionTileImpl dispatches 128, MiniMax-M2's).
template <size_t kD>
void AttentionTileFor(const AttentionTileArgs& a) {
  const size_t d = kD ? kD : a.head_dim, bs = a.block_size, group = a.group;
  const size_t rows = (a.q1 - a.q0) * group;
  // Keys [a.key0, kv_end) matter to this tile.
  const size_t kv_end = MinSize(a.first_pos + a.q1, a.key1);
  const size_t kv_stride = a.num_kv_heads * d;
  for (size_t r = 0; r < rows; ++r) {
    a.max[r] = -INFINITY;
    a.sum[r] = 0.0f;
    for (size_t j = 0; j < d; ++j) a.acc[r * d + j] = 0.0f;
  }
  for (size_t b0 = a.key0 / bs * bs; b0 < kv_end; b0 += bs) {
    const size_t nk = MinSize(bs, kv_end - b0);
    const size_t lo = a.key0 > b0 ? a.key0 - b0 : 0;  // the block's keys [lo, nk) are the item's
    if (a.k_blocks8) {
      // FP8 block: codes [bs, kv_heads, d], then f32 scales [bs, kv_heads] (4-byte aligned).
      const uint8_t* kb = a.k_blocks8[b0 / bs];
      const uint8_t* vb = a.v_blocks8[b0 / bs];
      const float* ks = reinterpret_cast<const float*>(kb + a.scale_offset);
      const float* vs = reinterpret_cast<const float*>(vb + a.scale_offset);
      for (size_t p = lo; p < nk; ++p) {
        const size_t at = p * a.num_kv_heads + a.kv_head;
        WidenFp8(kb + at * d, ks[at], a.k + p * d, d);
        WidenFp8(vb + at * d, vs[at], a.v + p * d, d);
      }
    } else {
      const bf16* kb = a.k_blocks[b0 / bs] + a.kv_head * d;
      const bf16* vb = a.v_blocks[b0 / bs] + a.kv_head * d;
      for (size_t p = lo; p < nk; ++p) {
        Widen(kb + p * kv_stride, a.k + p * d, d);
        Widen(vb + p * kv_stride, a.v + p * d, d);
      }
    }
    for (size_t r = 0; r < rows; ++r) {
      const size_t i = a.q0 + r / group, h = a.kv_head * group + r % group;
      const size_t pos = a.first_pos + i;
      if (b0 + lo > pos) continue;
      const size_t n_valid = MinSize(nk, pos - b0 + 1);
      const float* qr = a.q + i * a.ldq + h * d;
      float* sr = a.scores + r * bs;
      float block_max = -INFINITY;
      for (size_t p = lo; p < n_valid; ++p) {
        sr[p] = a.scale * Dot(qr, a.k + p * d, d);
        block_max = MaxF(block_max, sr[p]);
      }
      const float new_max = MaxF(a.max[r], block_max);
      const float correction = std::exp(a.max[r] - new_max);
      float* ar = a.acc + r * d;
      if (correction != 1.0f) Scale(ar, correction, d);
      float block_sum = 0;
      for (size_t p = lo; p < n_valid; ++p) {
        const float e = std::exp(sr[p] - new_max);
        block_sum += e;
        Axpy(e, a.v + p * d, ar, d);
      }
      a.sum[r] = a.sum[r] * correction + block_sum;
      a.max[r] = new_max;
    }
  }
  for (size_t r = 0; r < rows; ++r) {
    const size_t i = a.q0 + r / group, h = a.kv_head * group + r % group;
    float* o = a.out + i * a.ldo + h * d;
    const float inv = 1.0f / a.sum[r];
    for (size_t j = 0; j < d; ++j) o[j] = a.acc[r * d + j] * inv;
    if (a.part_max) a.part_max[r] = a.max[r], a.part_sum[r] = a.sum[r];
  }
}

void AttentionTileImpl(const AttentionTileArgs& a) {
  if (a.head_dim == 128) return AttentionTileFor<128>(a);
  AttentionTileFor<0>(a);
}

}  // namespace
