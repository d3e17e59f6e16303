// MoE routing and the grouped expert MLP.
//
// MoeExperts gathers the (token, slot) pairs routed to each expert into one contiguous matrix,
// sorted by expert, and prepares it for the MatMul kernels once. Then:
//   run 1: every thread computes its share of the rows of every active expert's w1 and w3
//          (so for decode both threads stream every expert's weights, and for prefill each
//          expert's GEMM is split evenly whatever its token count);
//   run 2: silu(gate) ⊙ up, rounded / packed for w2;
//   run 3: every thread's share of every active expert's w2 rows;
//   run 4: y[t] (+)= Σ_j weight[t, j] · out[slot(t, j)] in slot order j (deterministic).
#include "kernels/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "kernels/activation.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"

namespace moeserve::kernels {
namespace {

// Indices of the k largest scores, in descending order; ties to the lower index.
void TopK(const float* score, size_t n, size_t k, int32_t* out, std::vector<int32_t>& order) {
  order.resize(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return score[a] > score[b] || (score[a] == score[b] && a < b);
  });
  std::copy(order.begin(), order.begin() + k, out);
}

void CheckRoute(size_t num_experts, size_t k) {
  MOESERVE_CHECK(k >= 1 && k <= num_experts, "top-k ", k, " of ", num_experts, " experts");
}

struct MoeScratch {
  std::vector<size_t> count, offset;  // per expert
  std::vector<size_t> slot_of;        // [T * k] -> row in the gathered matrices (or SIZE_MAX)
  std::vector<size_t> token_of;       // [rows]
  std::vector<size_t> active;         // experts with rows, in index order
  ScratchBuffer xprep, gate_up, act, aprep, down;
};

// [begin, end) of thread t's share of n rows, in multiples of grain.
std::pair<size_t, size_t> Share(size_t n, size_t grain, size_t t, size_t threads) {
  const size_t chunks = (n + grain - 1) / grain;
  const size_t b = chunks * t / threads * grain,
               e = std::min(n, chunks * (t + 1) / threads * grain);
  return {std::min(b, n), e};
}

}  // namespace

void RouteSigmoidTopK(const float* logits, const float* bias, size_t num_tokens, size_t num_experts,
                      size_t k, bool renormalize, float routed_scale, int32_t* idx,
                      float* weights) {
  CheckRoute(num_experts, k);
  std::vector<float> s(num_experts), biased(num_experts);
  std::vector<int32_t> order;
  for (size_t t = 0; t < num_tokens; ++t) {
    for (size_t e = 0; e < num_experts; ++e) {
      s[e] = 1.0f / (1.0f + std::exp(-logits[t * num_experts + e]));
      biased[e] = s[e] + (bias ? bias[e] : 0.0f);
    }
    int32_t* ti = idx + t * k;
    float* tw = weights + t * k;
    TopK(biased.data(), num_experts, k, ti, order);
    float sum = 0;
    for (size_t j = 0; j < k; ++j) sum += s[ti[j]];
    for (size_t j = 0; j < k; ++j) tw[j] = (renormalize ? s[ti[j]] / sum : s[ti[j]]) * routed_scale;
  }
}

void RouteSoftmaxTopK(const float* logits, size_t num_tokens, size_t num_experts, size_t k,
                      bool norm_topk_prob, int32_t* idx, float* weights) {
  CheckRoute(num_experts, k);
  std::vector<float> p(num_experts);
  std::vector<int32_t> order;
  for (size_t t = 0; t < num_tokens; ++t) {
    const float* l = logits + t * num_experts;
    const float mx = *std::max_element(l, l + num_experts);
    float total = 0;
    for (size_t e = 0; e < num_experts; ++e) total += p[e] = std::exp(l[e] - mx);
    for (size_t e = 0; e < num_experts; ++e) p[e] /= total;
    int32_t* ti = idx + t * k;
    float* tw = weights + t * k;
    TopK(p.data(), num_experts, k, ti, order);
    float sum = 0;
    for (size_t j = 0; j < k; ++j) sum += p[ti[j]];
    for (size_t j = 0; j < k; ++j) tw[j] = norm_topk_prob ? p[ti[j]] / sum : p[ti[j]];
  }
}

void MoeExperts(const float* x, size_t ldx, size_t num_tokens, const int32_t* idx,
                const float* weights, size_t k, std::span<const ExpertWeights> experts, float* y,
                size_t ldy, ThreadPool& pool, bool accumulate) {
  const size_t num_experts = experts.size();
  size_t hidden = 0, inter = 0;
  const ExpertWeights* first = nullptr;  // x preparation follows its formats (all the same)
  for (const ExpertWeights& e : experts) {
    if (e.w1.empty()) continue;
    if (hidden == 0) hidden = e.w1.cols, inter = e.w1.rows, first = &e;
    const DType dt1 = first->w1.dtype, dt2 = first->w2.dtype;
    CheckWeight(e.w1), CheckWeight(e.w3), CheckWeight(e.w2);
    MOESERVE_CHECK(e.w1.cols == hidden && e.w1.rows == inter && e.w3.rows == inter &&
                       e.w3.cols == hidden && e.w2.rows == hidden && e.w2.cols == inter &&
                       e.w1.dtype == dt1 && e.w3.dtype == dt1 && e.w2.dtype == dt2 &&
                       e.w1.format == first->w1.format && e.w3.format == first->w1.format &&
                       e.w2.format == first->w2.format && !e.w3.empty() && !e.w2.empty(),
                   "MoeExperts: inconsistent expert shapes");
  }
  if (!accumulate) {
    // Without any expert on this rank, y still has the right width: experts' w2 rows = H = ldx's.
    const size_t width = hidden;
    for (size_t t = 0; t < num_tokens && width; ++t)
      std::fill(y + t * ldy, y + t * ldy + width, 0.0f);
  }
  if (hidden == 0 || num_tokens == 0) return;

  // A reference: lambdas running on pool workers must not name the thread_local itself (that
  // would be the worker's own, empty instance).
  thread_local MoeScratch tl_scratch;
  MoeScratch& sc = tl_scratch;
  sc.count.assign(num_experts, 0);
  for (size_t i = 0; i < num_tokens * k; ++i) {
    MOESERVE_CHECK(idx[i] >= 0 && static_cast<size_t>(idx[i]) < num_experts, "expert index ",
                   idx[i], " of ", num_experts);
    if (!experts[idx[i]].w1.empty()) ++sc.count[idx[i]];
  }
  sc.offset.assign(num_experts + 1, 0);
  sc.active.clear();
  for (size_t e = 0; e < num_experts; ++e) {
    sc.offset[e + 1] = sc.offset[e] + sc.count[e];
    if (sc.count[e]) sc.active.push_back(e);
  }
  const size_t rows = sc.offset[num_experts];
  if (rows == 0) return;
  sc.slot_of.assign(num_tokens * k, SIZE_MAX);
  sc.token_of.resize(rows);
  {
    std::vector<size_t>& fill = sc.count;  // reused as the per-expert fill cursor
    std::fill(fill.begin(), fill.end(), 0);
    for (size_t i = 0; i < num_tokens * k; ++i) {
      const size_t e = idx[i];
      if (experts[e].w1.empty()) continue;
      const size_t row = sc.offset[e] + fill[e]++;
      sc.slot_of[i] = row;
      sc.token_of[row] = i / k;
    }
  }
  const Isa isa = BestIsa();
  // Each routed (token, slot) row converted straight from x, on all threads.
  const PreparedX px =
      PrepareXParallel(isa, first->w1, x, ldx, sc.token_of.data(), rows, hidden, sc.xprep, pool);

  // Run 1: gate and up into gate_up [rows, 2I] (gate in columns 0..I, up in I..2I).
  float* gate_up = sc.gate_up.As<float>(rows * 2 * inter);
  pool.Run([&](size_t t, size_t threads) {
    for (size_t e : sc.active) {
      const size_t m = sc.offset[e + 1] - sc.offset[e];
      const size_t grain = MatMulRowGrain(isa, experts[e].w1, m);
      const auto [b, end] = Share(2 * inter, grain, t, threads);
      const PreparedX xe = px.Rows(sc.offset[e], m);
      float* ye = gate_up + sc.offset[e] * 2 * inter;
      // Virtual rows [0, I) are w1's, [I, 2I) are w3's.
      if (b < inter)
        MatMulRows(isa, xe, experts[e].w1, b, std::min(end, inter), ye, 2 * inter, false);
      if (end > inter)
        MatMulRows(isa, xe, experts[e].w3, std::max(b, inter) - inter, end - inter, ye + inter,
                   2 * inter, false);
    }
  });
  // Run 2: activation, then bf16 rounding / packing of it for w2 (each thread its rows).
  float* act = sc.act.As<float>(rows * inter);
  pool.ParallelFor(rows, 1, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r)
      SiluMulIsa(isa, gate_up + r * 2 * inter, gate_up + r * 2 * inter + inter, act + r * inter,
                 inter);
  });
  const PreparedX pa =
      PrepareXParallel(isa, first->w2, act, inter, nullptr, rows, inter, sc.aprep, pool);
  // Run 3: down projection into down [rows, H].
  float* down = sc.down.As<float>(rows * hidden);
  pool.Run([&](size_t t, size_t threads) {
    for (size_t e : sc.active) {
      const size_t m = sc.offset[e + 1] - sc.offset[e];
      const auto [b, end] = Share(hidden, MatMulRowGrain(isa, experts[e].w2, m), t, threads);
      if (b < end)
        MatMulRows(isa, pa.Rows(sc.offset[e], m), experts[e].w2, b, end,
                   down + sc.offset[e] * hidden, hidden, false);
    }
  });
  // Run 4: weighted sum per token in slot order.
  pool.ParallelFor(num_tokens, 1, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      float* yt = y + t * ldy;
      for (size_t j = 0; j < k; ++j) {
        const size_t row = sc.slot_of[t * k + j];
        if (row == SIZE_MAX) continue;
        const float w = weights[t * k + j];
        const float* d = down + row * hidden;
        for (size_t i = 0; i < hidden; ++i) yt[i] += w * d[i];
      }
    }
  });
}

void MoeExpertsReference(const float* x, size_t ldx, size_t num_tokens, const int32_t* idx,
                         const float* weights, size_t k, std::span<const ExpertWeights> experts,
                         float* y, size_t ldy, bool accumulate) {
  size_t hidden = 0;
  for (const ExpertWeights& e : experts)
    if (!e.w1.empty()) hidden = e.w1.cols;
  std::vector<float> g, u, a, o, sum;
  for (size_t t = 0; t < num_tokens; ++t) {
    sum.assign(hidden, 0.0f);
    for (size_t j = 0; j < k; ++j) {
      const int32_t e = idx[t * k + j];
      MOESERVE_CHECK(e >= 0 && static_cast<size_t>(e) < experts.size(), "expert index ", e);
      const ExpertWeights& ew = experts[e];
      if (ew.w1.empty()) continue;
      const size_t inter = ew.w1.rows;
      g.resize(inter), u.resize(inter), a.resize(inter), o.resize(hidden);
      MatMulReference(x + t * ldx, ldx, 1, ew.w1, g.data(), inter);
      MatMulReference(x + t * ldx, ldx, 1, ew.w3, u.data(), inter);
      SiluMulReference(g.data(), u.data(), a.data(), inter);
      MatMulReference(a.data(), inter, 1, ew.w2, o.data(), hidden);
      for (size_t i = 0; i < hidden; ++i) sum[i] += weights[t * k + j] * o[i];
    }
    for (size_t i = 0; i < hidden; ++i)
      y[t * ldy + i] = accumulate ? y[t * ldy + i] + sum[i] : sum[i];
  }
}

}  // namespace moeserve::kernels
