// bench_mxfp4_i8: the int8 MXFP4 path (mxfp4_i8.h: Q8 activations × repacked kMxfp4I8 weights,
// through MatMul, so the ISA's kernel: VNNI on AVX-512 BF16, else AVX2) beside the unrepacked
// kMxfp4 path through MatMul (bf16 activations), on the MiniMax-M2.1 expert shapes, 2 threads by
// default. Weights are cycled through 64 copies (> 4x the LLC) so every run reads them from DRAM.
// The int8 time includes quantizing x.
//   m = 1: GB/s of weight bytes read, beside a read-bandwidth probe of the same bytes run just
//          before each kernel run (the shared host's bandwidth drifts), and the roofline's.
//   m > 1 (16 and 512 by default): GOP/s = 2·m·rows·cols / time.
// Then MoeExperts as a decode step runs it (8 experts of 64 per token), against the probe.
// Figures are medians over the runs.
//   bench_mxfp4_i8 [--runs N] [--threads N] [--m M] [--hot]
// --hot: one copy of each weight, LLC-resident after the first run, and a slice that fits L2:
// the kernel's compute rate.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "bench_timing.h"
#include "kernels/internal.h"
#include "kernels/matmul.h"
#include "kernels/moe.h"
#include "kernels/mxfp4_i8.h"
#include "kernels/quant.h"
#include "kernels/roofline.h"
#include "read_probe.h"
#include "runtime/cpu_features.h"
#include "runtime/huge_page_arena.h"
#include "runtime/thread_pool.h"

namespace moeserve::kernels {
namespace {

using bench::Median;
using bench::Now;
using bench::ReadProbe;

constexpr size_t kCopies = 64;
size_t g_only_m = 0;  // --m M: only that m (any; prefill's experts get 1-40 tokens each)
bool g_hot = false;   // --hot: one copy, LLC-resident after the first run (the kernel's compute)

// One expert shape in both formats, kCopies copies of each (same codes, distinct memory). As in
// the engine, the repacked copies sit on 2 MiB pages (the weight arena) and the checkpoint-layout
// ones on 4 KiB pages (the engine reads those from the checkpoint's mapping).
struct Weights {
  std::vector<std::vector<uint8_t>> codes, scales;
  HugePageArena arena;
  std::vector<WeightMatrix> mxfp4, i8;
  size_t bytes = 0;  // codes + scales of one copy (the same in both formats)
};

Weights MakeWeights(size_t rows, size_t cols) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> f(rows * cols);
  for (float& v : f) v = normal(rng);
  Weights w;
  std::vector<uint8_t> codes(rows * cols / 2), scales(rows * cols / 32);
  QuantizeMxfp4(f.data(), rows, cols, codes.data(), scales.data());
  const WeightMatrix src{DType::kU8,           codes.data(),  rows,      cols, cols / 2,
                         WeightFormat::kMxfp4, scales.data(), cols / 32, 0,    0};
  std::vector<uint8_t> codes8(Mxfp4I8CodeBytes(rows, cols)), scales8(Mxfp4I8ScaleBytes(rows, cols));
  const WeightMatrix packed = RepackMxfp4I8(src, codes8.data(), scales8.data());
  for (size_t c = 0; c < kCopies; ++c) {
    w.codes.push_back(codes);
    w.scales.push_back(scales);
  }
  for (size_t c = 0; c < kCopies; ++c) {
    WeightMatrix a = src, b = packed;
    a.data = w.codes[c].data();
    a.scales = w.scales[c].data();
    uint8_t* c8 = w.arena.Allocate(codes8.size());
    uint8_t* s8 = w.arena.Allocate(scales8.size());
    std::copy(codes8.begin(), codes8.end(), c8);
    std::copy(scales8.begin(), scales8.end(), s8);
    b.data = c8;
    b.scales = s8;
    w.mxfp4.push_back(a);
    w.i8.push_back(b);
  }
  w.bytes = codes.size() + scales.size();
  return w;
}

// The int8 path as the engine runs it: the public MatMul on the kMxfp4I8 view quantizes x
// (over the pool for m >= 8) and splits the row groups over the pool, with the ISA's kernel
// (MOESERVE_ISA=avx2 on an AVX-512 machine times the AVX2 one).
void MatMulInt8(const float* x, size_t m, const WeightMatrix& w, float* y, KernelContext& ctx) {
  MatMul(x, w.cols, m, w, y, w.rows, ctx);
}

struct Shape {
  const char* name;
  size_t rows, cols;
};

void BenchShape(KernelContext& ctx, ReadProbe& probe, double roof_gbps, int runs, const Shape& s,
                const std::vector<float>& x, std::vector<float>& y) {
  const Weights w = MakeWeights(s.rows, s.cols);
  const std::vector<size_t> ms =
      g_only_m ? std::vector<size_t>{g_only_m} : std::vector<size_t>{1, 16, 512};
  for (size_t m : ms) {
    // Per path: seconds per run; m = 1 also the probe's seconds before each run.
    std::vector<double> t_i8, t_f32, t_probe;
    const int n = m == 1 ? 4 * runs : m <= 64 ? 2 * runs : runs;
    for (int r = -1; r < n; ++r) {  // round -1 warms up
      const size_t c = g_hot ? 0 : static_cast<size_t>(r + 1) % kCopies;
      const double p = m == 1 ? probe.Seconds(w.bytes) : 0;
      double t0 = Now();
      MatMulInt8(x.data(), m, w.i8[c], y.data(), ctx);
      const double a = Now() - t0;
      t0 = Now();
      MatMul(x.data(), s.cols, m, w.mxfp4[g_hot ? 0 : (c + kCopies / 2) % kCopies], y.data(),
             s.rows, ctx);
      const double b = Now() - t0;
      if (r < 0) continue;
      t_i8.push_back(a);
      t_f32.push_back(b);
      t_probe.push_back(p);
    }
    const double ti = Median(t_i8), tf = Median(t_f32);
    if (m == 1) {
      const double gi = w.bytes / ti / 1e9, gf = w.bytes / tf / 1e9;
      const double gp = w.bytes / Median(t_probe) / 1e9;
      std::vector<double> ratio;  // per run: robust to the host's bandwidth drifting
      for (size_t i = 0; i < t_i8.size(); ++i) ratio.push_back(t_probe[i] / t_i8[i]);
      std::printf(
          "  %-9s [%4zu,%4zu] m=%-3zu int8 %7.1f us (best %6.1f) %5.1f GB/s = %3.0f%% of probe "
          "%5.1f GB/s "
          "(median per-run ratio %3.0f%%), %3.0f%% of roofline %5.1f | unrepacked %7.1f us "
          "%5.1f GB/s = %3.0f%% of probe\n",
          s.name, s.rows, s.cols, m, ti * 1e6, *std::min_element(t_i8.begin(), t_i8.end()) * 1e6,
          gi, 100 * gi / gp, gp, 100 * Median(ratio), 100 * gi / roof_gbps, roof_gbps, tf * 1e6, gf,
          100 * gf / gp);
    } else {
      const double ops = 2.0 * m * s.rows * s.cols;
      std::printf(
          "  %-9s [%4zu,%4zu] m=%-3zu int8 %7.1f us %6.1f GOP/s (best %6.1f) | unrepacked "
          "%7.1f us %6.1f GOP/s (best %6.1f)\n",
          s.name, s.rows, s.cols, m, ti * 1e6, ops / ti / 1e9,
          ops / *std::min_element(t_i8.begin(), t_i8.end()) / 1e9, tf * 1e6, ops / tf / 1e9,
          ops / *std::min_element(t_f32.begin(), t_f32.end()) / 1e9);
    }
  }
}

// MoeExperts as a decode step runs it: one token, top-8 of 64 experts with the M2.1 expert shapes
// (64 x 7.5 MB, so every step's experts come from DRAM), beside the read probe of the same bytes
// run just before each step.
void BenchMoeDecode(KernelContext& ctx, ReadProbe& probe, int runs, const Weights& up,
                    const Weights& down, const std::vector<float>& x, std::vector<float>& y) {
  constexpr size_t kExperts = kCopies, kTopK = 8;
  std::vector<ExpertWeights> experts(kExperts);
  for (size_t e = 0; e < kExperts; ++e)
    experts[e] = {up.i8[e], up.i8[(e + kExperts / 2) % kExperts], down.i8[e]};
  const size_t hidden = up.i8[0].cols;
  const double bytes = kTopK * (2.0 * up.bytes + down.bytes);
  std::vector<int32_t> idx(kTopK);
  const std::vector<float> weights(kTopK, 1.0f / kTopK);
  std::vector<double> t_moe, ratio;
  for (int r = -1; r < 4 * runs; ++r) {
    for (size_t j = 0; j < kTopK; ++j)
      idx[j] = static_cast<int32_t>(((r + 1) * kTopK + j) % kExperts);
    const double p = probe.Seconds(static_cast<size_t>(bytes));
    const double t0 = Now();
    MoeExperts(x.data(), hidden, 1, idx.data(), weights.data(), kTopK, experts, y.data(), hidden,
               ctx);
    const double t = Now() - t0;
    if (r < 0) continue;
    t_moe.push_back(t);
    ratio.push_back(p / t);
  }
  const double tm = Median(t_moe);
  std::printf(
      "  MoeExperts decode (1 token, top-%zu of %zu, w1/w3 [%zu,%zu], w2 [%zu,%zu]) %7.1f us "
      "%5.1f GB/s (best %5.1f), median per-run ratio to the read probe %3.0f%%\n",
      kTopK, kExperts, up.i8[0].rows, hidden, down.i8[0].rows, down.i8[0].cols, tm * 1e6,
      bytes / tm / 1e9, bytes / *std::min_element(t_moe.begin(), t_moe.end()) / 1e9,
      100 * Median(ratio));
}

}  // namespace

int Main(int argc, char** argv) {
  int runs = 11;
  size_t threads = 2;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc)
      runs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--m") && i + 1 < argc)
      g_only_m = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--hot"))
      g_hot = true;
  }
  runs = std::max(runs, 3);
  if (BestIsa() < Isa::kAvx2) {
    std::printf("bench_mxfp4_i8: needs AVX2 (isa %s)\n", IsaName(BestIsa()).c_str());
    return 0;
  }
  ThreadPool pool(threads);
  KernelContext ctx(pool);
  const Roofline roof = MeasureRoofline(ctx);
  std::printf("isa %s, %zu threads, median of runs (m=1: %d, m=16: %d, m=512: %d)\n",
              IsaName(BestIsa()).c_str(), pool.num_threads(), 4 * runs, 2 * runs, runs);
  std::printf("roofline: read %.1f GB/s, f32 FMA %.0f GFLOP/s\n", roof.read_gbps,
              roof.f32_fma_gflops);
  std::mt19937 rng(2);
  std::vector<float> x(512 * 3072), y(512 * 3072);
  for (float& v : x) v = (static_cast<int>(rng() % 2001) - 1000) * 1e-3f;
  ReadProbe probe(pool);
  std::vector<Shape> shapes = {{"expert w1", 1536, 3072}, {"expert w2", 3072, 1536}};
  // With --hot, also a slice of w1 small enough for the cores' L2 (0.4 MB): the expert shapes
  // stream from the LLC, whose bandwidth can bound them before the kernel's arithmetic does.
  if (g_hot) shapes.push_back({"L2 slice", 256, 3072});
  for (const Shape& s : shapes) BenchShape(ctx, probe, roof.read_gbps, runs, s, x, y);
  if (!g_hot && (g_only_m == 0 || g_only_m == 1))
    BenchMoeDecode(ctx, probe, runs, MakeWeights(1536, 3072), MakeWeights(3072, 1536), x, y);
  return 0;
}

}  // namespace moeserve::kernels

int main(int argc, char** argv) {
  return moeserve::kernels::Main(argc, argv);
}
