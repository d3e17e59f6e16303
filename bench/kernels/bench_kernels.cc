// bench_kernels: MatMul (decode GEMV m=1, prefill GEMM m=512) on the MiniMax-M2.1 shapes and
// MoeExperts decode, each beside this machine's measured roofline. Median of the runs.
//   bench_kernels [--runs N] [--threads N] [--quick] [--gemv-m M] [--panels]
// --panels: the GEMV / GEMM and MoE expert weights repacked into 16-row panels (bf16_panels.h), the
// layout `moeserve serve` loads bf16 weights in on AVX2 and AVX-512 BF16; else dense rows.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "kernels/attention.h"
#include "kernels/bf16_panels.h"
#include "kernels/matmul.h"
#include "kernels/moe.h"
#include "kernels/roofline.h"
#include "runtime/cpu_features.h"
#include "runtime/huge_page_arena.h"
#include "runtime/thread_pool.h"

namespace moeserve::kernels {
namespace {

using bench::Now;
using bench::Time;
using bench::Timing;

std::vector<bf16> RandomWeights(size_t n, uint32_t seed) {
  std::vector<bf16> w(n);
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) w[i] = F32ToBf16((static_cast<int>(rng() % 2001) - 1000) * 1e-4f);
  return w;
}

struct Shape {
  const char* name;
  size_t rows, cols;
};

// A [rows, cols] bf16 matrix as the kernels see it: dense rows, or repacked into panels, placed in
// `arena` (which must outlive the view) as the engine places its weights: on 2 MiB pages, each
// matrix on a 64-byte line. Why: with 4 KiB pages (a vector's memory) the hardware prefetchers
// stop at every page and the TLB misses every 4 KiB, so a GEMV from DRAM measured other than the
// engine's; from a vector's own 16-byte aligned start, every 64-byte panel line the AVX-512
// kernels load would straddle two cache lines (about a tenth of their GEMM's speed).
WeightMatrix View(const std::vector<bf16>& w, size_t rows, size_t cols, bool as_panels,
                  HugePageArena& arena) {
  const WeightMatrix dense = Bf16Matrix(w.data(), rows, cols);
  if (!as_panels) {
    auto* copy = reinterpret_cast<bf16*>(arena.Allocate(w.size() * sizeof(bf16)));
    std::copy(w.begin(), w.end(), copy);
    return Bf16Matrix(copy, rows, cols);
  }
  auto* panels = reinterpret_cast<bf16*>(arena.Allocate(Bf16PanelElems(rows, cols) * sizeof(bf16)));
  return RepackBf16Panels(dense, panels);
}

}  // namespace

int Main(int argc, char** argv) {
  int runs = 11;
  size_t threads = 0;
  bool quick = false, panels = false;
  size_t gemv_m = 1;  // tokens of the GEMV rows (2..7: a decode batch's tokens per expert)
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc)
      runs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--panels"))
      panels = true;
    else if (!std::strcmp(argv[i], "--gemv-m") && i + 1 < argc)
      gemv_m = std::max(1, std::atoi(argv[++i]));
  }
  ThreadPool pool(threads);
  KernelContext ctx(pool);
  std::printf("isa %s, %zu threads, median of %d runs, bf16 weights %s\n",
              IsaName(BestIsa()).c_str(), pool.num_threads(), runs,
              panels ? "in 16-row panels" : "dense");
  Roofline roof = MeasureRoofline(ctx);
  std::printf("roofline: read %.1f GB/s, bf16 dot %.0f GFLOP/s, f32 FMA %.0f GFLOP/s",
              roof.read_gbps, roof.bf16_fma_gflops, roof.f32_fma_gflops);
  if (roof.bf16_tile_gflops > 0) {
    std::printf(", bf16 AMX tiles %.0f GFLOP/s", roof.bf16_tile_gflops);
    // Panels run their GEMMs on the tile unit: the "bf16 peak" below is its peak.
    if (panels) roof.bf16_fma_gflops = roof.bf16_tile_gflops;
  }
  std::printf("\n\n");

  const Shape shapes[] = {{"q_proj", 6144, 3072},
                          {"o_proj", 3072, 6144},
                          {"k_proj", 1024, 3072},
                          {"expert w1", 1536, 3072},
                          {"expert w2", 3072, 1536}};
  std::mt19937 rng(1);
  std::vector<float> x(512 * 6144), y(512 * 6144);
  for (float& v : x) v = (static_cast<int>(rng() % 2001) - 1000) * 1e-3f;

  std::printf("GEMV m=%zu (weights cycled through > 4x LLC so every byte comes from DRAM)\n",
              gemv_m);
  for (const Shape& s : shapes) {
    const size_t bytes = s.rows * s.cols * 2;
    const size_t copies = std::max<size_t>(2, (160u << 20) / bytes);
    HugePageArena arena;
    std::vector<WeightMatrix> views;
    for (size_t c = 0; c < copies; ++c)
      views.push_back(View(RandomWeights(s.rows * s.cols, c + 1), s.rows, s.cols, panels, arena));
    const Timing tm = Time(runs * 4, [&](int r) {
      MatMul(x.data(), s.cols, gemv_m, views[r % copies], y.data(), s.rows, ctx);
    });
    const double gbps = bytes / tm.median_s / 1e9, best = bytes / tm.best_s / 1e9;
    std::printf(
        "  %-10s [%5zu,%5zu] %8.1f us  %6.1f GB/s = %3.0f%% of read roofline "
        "(best run %.1f GB/s = %.0f%%)\n",
        s.name, s.rows, s.cols, tm.median_s * 1e6, gbps, 100 * gbps / roof.read_gbps, best,
        100 * best / roof.read_gbps);
  }

  const size_t m = 512;
  std::printf("\nGEMM m=%zu\n", m);
  for (const Shape& s : shapes) {
    if (quick && s.rows * s.cols > 1536 * 3072) continue;
    const std::vector<bf16> w = RandomWeights(s.rows * s.cols, 7);
    HugePageArena arena;
    const WeightMatrix view = View(w, s.rows, s.cols, panels, arena);
    const Timing tm = Time(std::max(runs / 2, 5),
                           [&](int) { MatMul(x.data(), s.cols, m, view, y.data(), s.rows, ctx); });
    const double flop = 2.0 * m * s.rows * s.cols;
    const double gflops = flop / tm.median_s / 1e9, best = flop / tm.best_s / 1e9;
    const double peak = roof.bf16_fma_gflops > 0 ? roof.bf16_fma_gflops : 1e30;
    std::printf(
        "  %-10s [%5zu,%5zu] %8.2f ms  %6.1f GFLOP/s = %3.0f%% of bf16 peak "
        "(best run %.1f = %.0f%%)\n",
        s.name, s.rows, s.cols, tm.median_s * 1e3, gflops, 100 * gflops / peak, best,
        100 * best / peak);
  }

  // MoE decode: 32 experts (906 MB, never cache resident), top-8 of them per token.
  {
    const size_t E = 32, H = 3072, I = 1536, K = 8;
    // Dense rows, or panels with --panels (the layout the engine loads bf16 experts in).
    HugePageArena arena;
    std::vector<ExpertWeights> ex(E);
    for (size_t e = 0; e < E; ++e) {
      ex[e].w1 = View(RandomWeights(I * H, 3 * e + 1), I, H, panels, arena);
      ex[e].w3 = View(RandomWeights(I * H, 3 * e + 2), I, H, panels, arena);
      ex[e].w2 = View(RandomWeights(H * I, 3 * e + 3), H, I, panels, arena);
    }
    std::vector<int32_t> idx(K);
    std::vector<float> wts(K, 1.0f / K);
    const Timing tm = Time(runs * 2, [&](int r) {
      for (size_t j = 0; j < K; ++j) idx[j] = static_cast<int32_t>((r * K + j) % E);
      MoeExperts(x.data(), H, 1, idx.data(), wts.data(), K, ex, y.data(), H, ctx);
    });
    const double bytes = K * 3.0 * I * H * 2;
    const double gbps = bytes / tm.median_s / 1e9, best = bytes / tm.best_s / 1e9;
    std::printf(
        "\nMoeExperts decode (1 token, top-%zu of %zu, [%zu,%zu]/[%zu,%zu]) %.2f ms  "
        "%.1f GB/s = %.0f%% of read roofline (best run %.1f GB/s = %.0f%%)\n",
        K, E, I, H, H, I, tm.median_s * 1e3, gbps, 100 * gbps / roof.read_gbps, best,
        100 * best / roof.read_gbps);
    // Prefill: 512 tokens, top-8 of the 32 experts (~128 tokens per expert: the GEMM path), and
    // 144 tokens (~36 per expert), what one step serving 16 clients computes: one 128-token
    // prompt and 16 decodes.
    for (const size_t T : {size_t{512}, size_t{144}}) {
      if (quick) break;
      std::vector<int32_t> pidx(T * K);
      std::vector<float> pw(T * K, 1.0f / K);
      std::mt19937 prng(5);
      for (size_t t = 0; t < T; ++t) {
        std::vector<int32_t> perm(E);
        for (size_t e = 0; e < E; ++e) perm[e] = static_cast<int32_t>(e);
        std::shuffle(perm.begin(), perm.end(), prng);
        std::copy(perm.begin(), perm.begin() + K, pidx.begin() + t * K);
      }
      const Timing pt = Time(5, [&](int) {
        MoeExperts(x.data(), H, T, pidx.data(), pw.data(), K, ex, y.data(), H, ctx);
      });
      const double flop = 2.0 * T * K * 3 * I * H;
      const double peak = roof.bf16_fma_gflops > 0 ? roof.bf16_fma_gflops : 1e30;
      std::printf(
          "MoeExperts prefill (%zu tokens, top-%zu of %zu) %.1f ms  %.1f GFLOP/s = %.0f%% of "
          "bf16 peak (best run %.1f = %.0f%%)\n",
          T, K, E, pt.median_s * 1e3, flop / pt.median_s / 1e9,
          100 * flop / pt.median_s / 1e9 / peak, flop / pt.best_s / 1e9,
          100 * flop / pt.best_s / 1e9 / peak);
    }
  }
  return 0;
}

}  // namespace moeserve::kernels

int main(int argc, char** argv) {
  return moeserve::kernels::Main(argc, argv);
}
