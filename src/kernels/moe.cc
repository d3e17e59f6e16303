// MoE routing and the grouped expert MLP.
//
// MoeExperts gathers the (token, slot) pairs routed to each expert into one contiguous matrix,
// sorted by expert, and prepares it for the MatMul kernels once. Then:
//   run 1: every thread computes its share of the rows of every active expert's w1 and w3
//          (so for decode both threads stream every expert's weights, and for prefill each
//          expert's GEMM is split evenly whatever its token count);
//   run 2: silu(gate) ⊙ up, rounded / packed for w2;
//          (runs 1 and 2 are one where w2 takes int8 x: see FusedGateUp)
//   run 3: 2 · threads column shares of every active expert's w2 rows, handed out to whichever
//          thread is free, each row times its routing weight added into y[token] at once:
//          y[t] (+)= Σ weight · out over t's experts in expert index order (HF's index_add_
//          order), whatever the thread count, since a share of H's columns takes the experts
//          one after another (the next waits for the previous add).
#include "kernels/moe.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "core/check.h"
#include "kernels/activation.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "kernels/mxfp4_i8.h"

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

// The routing tables, carved from one buffer of the context's call scratch.
struct MoeIndex {
  size_t* count;     // [E] rows per expert
  size_t* offset;    // [E + 1] first row of each expert in the gathered matrices
  size_t* active;    // [E] experts with rows, in index order (num_active of them)
  size_t* token_of;  // [T * k] (the first `rows`): the token of each row
  size_t* slot_at;   // [T * k] (the first `rows`): the (token, slot) of each row, t * k + j
  size_t num_active = 0;

  MoeIndex(ScratchBuffer& buf, size_t num_experts, size_t slots) {
    count = buf.As<size_t>(3 * num_experts + 1 + 2 * slots);
    offset = count + num_experts;
    active = offset + num_experts + 1;
    token_of = active + num_experts;
    slot_at = token_of + slots;
  }
};

// [begin, end) of thread t's share of n rows, in multiples of grain.
std::pair<size_t, size_t> Share(size_t n, size_t grain, size_t t, size_t threads) {
  const size_t chunks = (n + grain - 1) / grain;
  const size_t b = chunks * t / threads * grain,
               e = std::min(n, chunks * (t + 1) / threads * grain);
  return {std::min(b, n), e};
}

// Runs 1 and 2 in one, for experts whose w2 takes int8 x (kMxfp4I8): each expert's I columns of
// w1 and w3 in one share [a, b) per thread (a multiple of the 32-column Q8 block), the shares
// handed out to whichever thread is free (see MoeExperts' run 3 for why); each quantizes
// silu(gate) ⊙ up of its share straight into w2's x; Q8 blocks are independent, so the bytes
// are those of quantizing whole rows. The [rows, 2I] gate / up and [rows, I] activation matrices
// of the two-run path (at 512 tokens x top-8 of MiniMax-M2's shapes 50 and 25 MB, from DRAM)
// are never written: a thread's gate and up of one expert stay in its L2. MoeExperts on 256
// random experts of the slice's shapes, 512 tokens top-8, interleaved call by call with the
// two-run path (Zen 5, 2 threads): 134 vs 138-140 ms per layer (4-5%); decode the same.
PreparedX FusedGateUp(KernelContext& ctx, const GroupedX& gx, const MoeIndex& ix,
                      std::span<const size_t> active, std::span<const ExpertWeights> experts,
                      size_t inter, size_t rows, ScratchBuffer& act_x) {
  const PreparedX pa = AllocateQ8X(rows, inter, act_x);
  const size_t shares = ctx.pool().num_threads();
  ctx.pool().ParallelForDynamic(active.size() * shares, [&](size_t item, size_t t) {
    const size_t e = active[item / shares];
    const size_t m = ix.offset[e + 1] - ix.offset[e];
    const size_t grain = std::lcm(MatMulRowGrain(ctx, experts[e].w1, m), kMxfp4I8Block);
    const auto [a, b] = Share(inter, grain, item % shares, shares);
    if (a >= b) return;
    WorkerScratch& ws = ctx.worker(t);
    // m rows of b columns for gate, then for up; MatMulRows writes columns [a, b) of them.
    float* gate = ws.moe_gate_up.As<float>(2 * m * b);
    float* up = gate + m * b;
    const PreparedX xe = gx.Group(e);
    MatMulRows(ctx, xe, experts[e].w1, a, b, gate, b, false, ws);
    MatMulRows(ctx, xe, experts[e].w3, a, b, up, b, false, ws);
    for (size_t i = 0; i < m; ++i) {
      float* g = gate + i * b + a;
      SiluMul(ctx, g, up + i * b + a, g, b - a);  // in place: element by element
      QuantizeIntoQ8X(ctx, pa, ix.offset[e] + i, a, g, b - a);
    }
  });
  return pa;
}

// Runs 1 and 2 for every other format. Run 1: gate and up into gate_up [rows, 2I] (gate in
// columns 0..I, up in I..2I). Run 2: the activation, then its bf16 rounding / packing for w2, per
// expert (GroupedX).
GroupedX GateUpActivation(KernelContext& ctx, const GroupedX& gx, const MoeIndex& ix,
                          std::span<const size_t> active, std::span<const ExpertWeights> experts,
                          size_t num_experts, size_t inter, size_t rows, const WeightMatrix& w2,
                          CallScratch& sc) {
  float* gate_up = sc.moe_gate_up.As<float>(rows * 2 * inter);
  // One share of each expert's 2I virtual rows per thread, handed out to whichever thread is free
  // (as FusedGateUp; shares write disjoint columns of gate_up, so the order does not matter).
  const size_t shares = ctx.pool().num_threads();
  ctx.pool().ParallelForDynamic(active.size() * shares, [&](size_t item, size_t t) {
    const size_t e = active[item / shares];
    const size_t m = ix.offset[e + 1] - ix.offset[e];
    const size_t grain = MatMulRowGrain(ctx, experts[e].w1, m);
    const auto [b, end] = Share(2 * inter, grain, item % shares, shares);
    if (b >= end) return;
    WorkerScratch& ws = ctx.worker(t);
    const PreparedX xe = gx.Group(e);
    float* ye = gate_up + ix.offset[e] * 2 * inter;
    // Virtual rows [0, I) are w1's, [I, 2I) are w3's.
    if (b < inter)
      MatMulRows(ctx, xe, experts[e].w1, b, std::min(end, inter), ye, 2 * inter, false, ws);
    if (end > inter)
      MatMulRows(ctx, xe, experts[e].w3, std::max(b, inter) - inter, end - inter, ye + inter,
                 2 * inter, false, ws);
  });
  float* act = sc.moe_act.As<float>(rows * inter);
  ctx.pool().ParallelFor(rows, 1, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r)
      SiluMul(ctx, gate_up + r * 2 * inter, gate_up + r * 2 * inter + inter, act + r * inter,
              inter);
  });
  return GroupedX(ctx, w2, act, inter, nullptr, ix.offset, num_experts, inter, sc.moe_act_x);
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
                size_t ldy, KernelContext& ctx, bool accumulate) {
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
  // inter == 0: a tensor-parallel rank without any of the experts' intermediate columns (MXFP4's
  // 32-column split can leave one none); its experts add nothing, and the row kernels are not
  // asked for products over 0 columns (the GEMMs left them unwritten).
  if (hidden == 0 || inter == 0 || num_tokens == 0) return;

  CallScratch& sc = ctx.call();
  ThreadPool& pool = ctx.pool();
  MoeIndex ix(sc.moe_index, num_experts, num_tokens * k);
  std::fill(ix.count, ix.count + num_experts, 0);
  for (size_t i = 0; i < num_tokens * k; ++i) {
    MOESERVE_CHECK(idx[i] >= 0 && static_cast<size_t>(idx[i]) < num_experts, "expert index ",
                   idx[i], " of ", num_experts);
    if (!experts[idx[i]].w1.empty()) ++ix.count[idx[i]];
  }
  ix.offset[0] = 0;
  for (size_t e = 0; e < num_experts; ++e) {
    ix.offset[e + 1] = ix.offset[e] + ix.count[e];
    if (ix.count[e]) ix.active[ix.num_active++] = e;
  }
  const std::span<const size_t> active(ix.active, ix.num_active);
  const size_t rows = ix.offset[num_experts];
  if (rows == 0) return;
  {
    size_t* fill = ix.count;  // reused as the per-expert fill cursor
    std::fill(fill, fill + num_experts, 0);
    for (size_t i = 0; i < num_tokens * k; ++i) {
      const size_t e = idx[i];
      if (experts[e].w1.empty()) continue;
      const size_t row = ix.offset[e] + fill[e]++;
      ix.token_of[row] = i / k;
      ix.slot_at[row] = i;
    }
  }
  // Each routed (token, slot) row converted straight from x, on all threads, each expert's rows
  // a whole x of their own.
  const GroupedX gx(ctx, first->w1, x, ldx, ix.token_of, ix.offset, num_experts, hidden, sc.moe_x);

  // w2's x, one group per expert: int8 rows (FusedGateUp) or the format's own preparation.
  const GroupedX ga =
      TakesQ8Rows(ctx, first->w2)
          ? GroupedX::OfRows(FusedGateUp(ctx, gx, ix, active, experts, inter, rows, sc.moe_act_x),
                             ix.offset)
          : GateUpActivation(ctx, gx, ix, active, experts, num_experts, inter, rows, first->w2, sc);

  // Run 3: the down projection, added into y, in `chunks` column shares of H (in a grain common to
  // every m) per expert, handed out in order (expert by expert) to whichever thread is free. Why
  // not a fixed share per thread: on a shared machine one core often runs slower than the other
  // for seconds (Zen 5 VM: the same tile 549 vs 645 GOP/s pinned to one core or the other), and
  // the faster thread then waited for the slower at the end of every run (the main thread of a
  // bench_moe profile spent over a third of its MoE samples waiting). MoeExperts of 256 experts
  // (slice shapes), fixed shares and these interleaved call by call: 0.99-1.04x at 512
  // tokens, 1.06x at 16 and 1; bench_moe built before and after, with a busy loop sharing one of
  // the two cores: 270-272 -> 229-250 ms per layer. Bits: each column share of y takes the experts'
  // rows in expert index order, one add at a time, whichever thread computes them, so y does not
  // depend on the thread count or timing.
  const size_t grain = MatMulRowGrainForAnyM(ctx, first->w2);
  const size_t chunks = 2 * pool.num_threads();
  const std::unique_ptr<std::atomic<size_t>[]> added(new std::atomic<size_t>[chunks]);
  for (size_t j = 0; j < chunks; ++j) added[j].store(0, std::memory_order_relaxed);
  pool.ParallelForDynamic(active.size() * chunks, [&](size_t item, size_t t) {
    const size_t n = item / chunks, j = item % chunks;
    const auto [c0, c1] = Share(hidden, grain, j, chunks);
    if (c0 >= c1) return;  // every expert's share j is empty: no one waits for it
    const size_t e = active[n];
    const size_t m = ix.offset[e + 1] - ix.offset[e];
    WorkerScratch& ws = ctx.worker(t);
    // m rows of c1 columns; MatMulRows writes columns [c0, c1) of them.
    float* down = ws.moe_down.As<float>(m * c1);
    MatMulRows(ctx, ga.Group(e), experts[e].w2, c0, c1, down, c1, false, ws);
    // Chunk j of y takes the experts in index order: wait for the previous active expert's add
    // (handed out `chunks` items earlier, so it is done or running, never waiting on this one).
    while (added[j].load(std::memory_order_acquire) != n) std::this_thread::yield();
    for (size_t i = 0; i < m; ++i) {
      const size_t slot = ix.slot_at[ix.offset[e] + i];
      const float w = weights[slot];
      const float* d = down + i * c1;
      float* yt = y + slot / k * ldy;
      for (size_t c = c0; c < c1; ++c) yt[c] += w * d[c];
    }
    added[j].store(n + 1, std::memory_order_release);
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
