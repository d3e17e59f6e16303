// bench_quant: MatMul / MoeExperts on FP8-block and MXFP4 weights and attention over an FP8 KV
// cache, on the MiniMax-M2.1 shapes, beside this machine's measured roofline. Bandwidth figures
// count the bytes actually read (codes + scales, or K/V codes + scales). Median of the runs.
// The GEMV rows interleave a read-bandwidth probe of the same size with every kernel run (the host
// is shared and its bandwidth drifts by 30%+ between seconds), and print the kernel's median GB/s
// beside the probe's median and their ratio.
//   bench_quant [--runs N] [--threads N] [--quick] [--gemv] [--hot] [--uniform-codes] [--m M]
//               [--gemm-m M]
// The FP8 GEMV rows run on the checkpoint layout (fp8-block) and on the 16-row panels FP8 loads
// as on AVX2 and AMX (model::WeightLayoutFor). --gemv: only the GEMV rows. --hot: only the GEMV
// rows, on one LLC-resident weight, the probe reading LLC-resident bytes too (decode throughput
// against the LLC's). --uniform-codes: random codes instead of quantized N(0, 0.02) weights (the
// worst case for FP8: many subnormals). --m M: only the GEMV rows with m = M (1, 2, 4 or 7).
// --gemm-m M: the GEMM rows with m = M tokens instead of 512 (an expert of a 512-token prefill
// gets 512 · top-k / experts: 128 of the bench checkpoint's 32 experts, 16 of the slice's 256).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "bench_timing.h"
#include "kernels/attention.h"
#include "kernels/fp8_panels.h"
#include "kernels/internal.h"
#include "kernels/matmul.h"
#include "kernels/moe.h"
#include "kernels/quant.h"
#include "kernels/roofline.h"
#include "read_probe.h"
#include "runtime/cpu_features.h"
#include "runtime/thread_pool.h"

namespace moeserve::kernels {
namespace {

using bench::Median;
using bench::Now;
using bench::ReadProbe;
using bench::Time;
using bench::Timing;

// A quantized weight with random codes (finite e4m3 / any e2m1) and realistic scales.
struct QWeight {
  std::vector<uint8_t> codes, scales_u8;
  std::vector<float> scales_f32;
  std::vector<uint8_t> panel_codes;  // kFp8Panel: the codes and scales repacked (RepackFp8Panels)
  std::vector<float> panel_scales;
  WeightMatrix view;
  size_t bytes = 0;  // codes + scales read by one MatMul
};

// Codes of random draws (every finite code equally likely; ~1/16 of the e4m3 codes subnormal) or,
// by default, of N(0, 0.02) weights run through the quantizers, as a checkpoint's (where e4m3
// subnormals are rare: |w| below amax / 28672 of the block).
bool g_uniform_codes = false;

void FillCodes(WeightFormat fmt, size_t rows, size_t cols, uint32_t seed, QWeight& q) {
  std::mt19937 rng(seed);
  const bool fp8 = fmt == WeightFormat::kFp8Block;
  if (g_uniform_codes) {
    if (fp8) {
      for (uint8_t& c : q.codes) c = static_cast<uint8_t>(rng() % 0x7f) | (rng() & 0x80);
      for (float& s : q.scales_f32) s = 1e-4f * (1 + rng() % 100);
    } else {
      for (uint8_t& c : q.codes) c = static_cast<uint8_t>(rng());
      for (uint8_t& s : q.scales_u8) s = static_cast<uint8_t>(117 + rng() % 8);
    }
    return;
  }
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(rows * cols);
  for (float& v : w) v = normal(rng);
  if (fp8)
    QuantizeFp8Block(w.data(), rows, cols, q.codes.data(), q.scales_f32.data());
  else
    QuantizeMxfp4(w.data(), rows, cols, q.codes.data(), q.scales_u8.data());
}

QWeight MakeWeight(WeightFormat fmt, size_t rows, size_t cols, uint32_t seed) {
  QWeight q;
  if (fmt == WeightFormat::kFp8Block) {
    q.codes.resize(rows * cols);
    const size_t sr = (rows + 127) / 128, sc = (cols + 127) / 128;
    q.scales_f32.resize(sr * sc);
    q.view = {DType::kF8E4M3, q.codes.data(), rows, cols, cols, fmt, q.scales_f32.data(), sc};
    q.bytes = rows * cols + sr * sc * 4;
  } else {
    q.codes.resize(rows * cols / 2);
    q.scales_u8.resize(rows * cols / 32);
    q.view = {DType::kU8, q.codes.data(), rows, cols, cols / 2, fmt, q.scales_u8.data(), cols / 32};
    q.bytes = rows * cols / 2 + rows * cols / 32;
  }
  // Quantizing is slow (scalar): copies of a shape share the codes of the first one made.
  static std::map<std::tuple<WeightFormat, size_t, size_t>, QWeight> made;
  const auto key = std::make_tuple(fmt, rows, cols);
  auto it = made.find(key);
  if (it == made.end()) {
    FillCodes(fmt, rows, cols, seed, q);
    made.emplace(key, q);
  } else {
    q.codes = it->second.codes;
    q.scales_u8 = it->second.scales_u8;
    q.scales_f32 = it->second.scales_f32;
  }
  q.view.data = q.codes.data();
  q.view.scales = fmt == WeightFormat::kFp8Block ? static_cast<const void*>(q.scales_f32.data())
                                                 : q.scales_u8.data();
  return q;
}

// The FP8 weight repacked into 16-row panels (the layout FP8 loads as on AVX2 and AMX).
QWeight MakeFp8Panels(size_t rows, size_t cols, uint32_t seed) {
  QWeight q = MakeWeight(WeightFormat::kFp8Block, rows, cols, seed);
  q.panel_codes.resize(Fp8PanelCodeBytes(rows, cols));
  q.panel_scales.resize(Fp8PanelScaleFloats(rows, cols, 0));
  q.view = RepackFp8Panels(q.view, q.panel_codes.data(), q.panel_scales.data());
  q.bytes = q.panel_codes.size() + q.panel_scales.size() * sizeof(float);
  q.codes = {};
  return q;
}

QWeight MakeAny(WeightFormat fmt, size_t rows, size_t cols, uint32_t seed) {
  return fmt == WeightFormat::kFp8Panel ? MakeFp8Panels(rows, cols, seed)
                                        : MakeWeight(fmt, rows, cols, seed);
}

const char* FormatName(WeightFormat f) {
  return f == WeightFormat::kFp8Block   ? "fp8-block"
         : f == WeightFormat::kFp8Panel ? "fp8 16-row panels"
                                        : "mxfp4";
}

struct Shape {
  const char* name;
  size_t rows, cols;
};

// MatMul with m tokens on a quantized [rows, cols] weight: `runs` rounds of (read probe, kernel).
// hot: one weight, resident in the LLC after the first run, and the probe re-reading the same
// bytes (LLC bandwidth): the kernel's decode throughput, what it would reach on faster memory.
void BenchGemv(KernelContext& ctx, ReadProbe& probe, int runs, WeightFormat fmt, const Shape& s,
               size_t m, const float* x, float* y, bool hot) {
  const size_t one = MakeAny(fmt, 128, s.cols, 0).bytes * s.rows / 128;
  const size_t copies = hot ? 1 : std::max<size_t>(2, (160u << 20) / one);
  std::vector<QWeight> w;
  for (size_t c = 0; c < copies; ++c) w.push_back(MakeAny(fmt, s.rows, s.cols, c + 1));
  const double bytes = w[0].bytes;
  std::vector<double> kernel_gbps, probe_gbps, ratio;
  for (int r = -1; r < runs; ++r) {  // round -1 warms up
    const double probe_s = probe.Seconds(w[0].bytes, hot);
    const double t0 = Now();
    MatMul(x, s.cols, m, w[(r + 1) % copies].view, y, s.rows, ctx);
    const double kernel_s = Now() - t0;
    if (r < 0) continue;
    kernel_gbps.push_back(bytes / kernel_s / 1e9);
    probe_gbps.push_back(bytes / probe_s / 1e9);
    ratio.push_back(kernel_gbps.back() / probe_gbps.back());
  }
  const double k_med = Median(kernel_gbps), p_med = Median(probe_gbps);
  std::printf(
      "  %-10s [%5zu,%5zu] m=%zu %8.1f us  %6.1f GB/s | read %6.1f GB/s | %3.0f%% (median of "
      "per-run ratios %3.0f%%)  best run %.1f GB/s = %.0f%% of best read %.1f\n",
      s.name, s.rows, s.cols, m, bytes / k_med / 1e3, k_med, p_med, 100 * k_med / p_med,
      100 * Median(ratio), *std::max_element(kernel_gbps.begin(), kernel_gbps.end()),
      100 * *std::max_element(kernel_gbps.begin(), kernel_gbps.end()) /
          *std::max_element(probe_gbps.begin(), probe_gbps.end()),
      *std::max_element(probe_gbps.begin(), probe_gbps.end()));
}

void BenchAttention(const Roofline& roof, KernelContext& kc, int runs, bool fp8) {
  // Decode: 8 sequences × 4096 cached tokens, one rank of MiniMax-M2.1 at tp=1 (48 q heads,
  // 8 kv heads, head_dim 128), block 16. K+V bytes: 134 MB bf16, 69 MB fp8: beyond the LLC.
  const AttentionShape s{48, 8, 128, 16, 1 / std::sqrt(128.0f)};
  const size_t seqs = 8, context = 4096, blocks_per = context / s.block_size,
               blocks = seqs * blocks_per;
  const size_t elems = s.block_size * s.num_kv_heads * s.head_dim;
  const size_t block_bytes =
      fp8 ? KvBlockBytesFp8(s.block_size, s.num_kv_heads, s.head_dim) : elems * 2;
  std::vector<uint8_t> pool_k(blocks * block_bytes), pool_v(blocks * block_bytes);
  std::mt19937 rng(9);
  if (fp8) {
    std::vector<float> row(s.num_kv_heads * s.head_dim);
    for (size_t b = 0; b < blocks; ++b)
      for (size_t r = 0; r < s.block_size; ++r)
        for (auto* pool_ptr : {&pool_k, &pool_v}) {
          for (float& v : row) v = (static_cast<int>(rng() % 2001) - 1000) * 1e-3f;
          WriteKvRowFp8(row.data(), s.num_kv_heads, s.head_dim, s.block_size, r,
                        pool_ptr->data() + b * block_bytes);
        }
  } else {
    for (size_t i = 0; i < blocks * elems; ++i) {
      const bf16 k = F32ToBf16((static_cast<int>(rng() % 2001) - 1000) * 1e-3f);
      std::memcpy(pool_k.data() + 2 * i, &k, 2);
      std::memcpy(pool_v.data() + 2 * i, &k, 2);
    }
  }
  std::vector<size_t> order(blocks);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<const uint8_t*> k8(blocks), v8(blocks);
  std::vector<const bf16*> k16(blocks), v16(blocks);
  for (size_t i = 0; i < blocks; ++i) {
    k8[i] = pool_k.data() + order[i] * block_bytes;
    v8[i] = pool_v.data() + order[i] * block_bytes;
    k16[i] = reinterpret_cast<const bf16*>(k8[i]);
    v16[i] = reinterpret_cast<const bf16*>(v8[i]);
  }
  std::vector<AttentionSeq> sq8;
  std::vector<AttentionSeq> sq16;
  for (size_t i = 0; i < seqs; ++i) {
    sq8.push_back(
        {i, 1, context, nullptr, nullptr, k8.data() + i * blocks_per, v8.data() + i * blocks_per});
    sq16.push_back({i, 1, context, k16.data() + i * blocks_per, v16.data() + i * blocks_per});
  }
  const size_t width = s.num_heads * s.head_dim;
  std::vector<float> q(seqs * width, 0.01f), out(seqs * width);
  const Timing tm = Time(
      runs, [&](int) { Attention(q.data(), width, fp8 ? sq8 : sq16, s, out.data(), width, kc); });
  const double bytes = 2.0 * blocks * block_bytes;
  const double gbps = bytes / tm.median_s / 1e9, best = bytes / tm.best_s / 1e9;
  std::printf(
      "  %-4s KV: 8 seqs x %zu tokens  %8.2f ms  %6.1f GB/s = %3.0f%% of read roofline "
      "(best run %.1f GB/s = %.0f%%)  [%.0f MB K+V]\n",
      fp8 ? "fp8" : "bf16", context, tm.median_s * 1e3, gbps, 100 * gbps / roof.read_gbps, best,
      100 * best / roof.read_gbps, bytes / 1e6);
}

}  // namespace

int Main(int argc, char** argv) {
  int runs = 11;
  size_t threads = 0;
  bool quick = false, gemv_only = false, hot = false;
  size_t only_m = 0, gemm_m = 512;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc)
      runs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--gemv"))
      gemv_only = true;
    else if (!std::strcmp(argv[i], "--m") && i + 1 < argc)
      only_m = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--gemm-m") && i + 1 < argc)
      gemm_m = std::clamp<size_t>(std::atoi(argv[++i]), 1, 512);
    else if (!std::strcmp(argv[i], "--uniform-codes"))
      g_uniform_codes = true;
    else if (!std::strcmp(argv[i], "--hot"))
      gemv_only = hot = true;
  }
  runs = std::max(runs, 5);
  ThreadPool pool(threads);
  KernelContext ctx(pool);
  std::printf("isa %s, %zu threads, median of %d runs\n", IsaName(BestIsa()).c_str(),
              pool.num_threads(), runs);
  Roofline roof;
  if (!gemv_only) {
    roof = MeasureRoofline(ctx);
    std::printf("roofline: read %.1f GB/s, bf16 dot %.0f GFLOP/s, f32 FMA %.0f GFLOP/s\n\n",
                roof.read_gbps, roof.bf16_fma_gflops, roof.f32_fma_gflops);
  }
  const Shape shapes[] = {{"expert w1", 1536, 3072}, {"expert w2", 3072, 1536}};
  std::mt19937 rng(1);
  std::vector<float> x(512 * 3072), y(512 * 3072);
  for (float& v : x) v = (static_cast<int>(rng() % 2001) - 1000) * 1e-3f;

  ReadProbe probe(pool);
  for (WeightFormat fmt :
       {WeightFormat::kFp8Block, WeightFormat::kFp8Panel, WeightFormat::kMxfp4}) {
    std::printf(
        "GEMV, %s (weights cycled through > 4x LLC so every byte comes from DRAM; read probe of "
        "the same bytes before each run)\n",
        FormatName(fmt));
    for (const Shape& s : shapes)
      for (size_t m : {1, 2, 4, 7}) {
        if (!gemv_only && m != 1 && m != 4) continue;
        if (only_m && m != only_m) continue;
        BenchGemv(ctx, probe, runs * 4, fmt, s, m, x.data(), y.data(), hot);
      }
    if (gemv_only) continue;
    const size_t m = gemm_m;
    std::printf("GEMM m=%zu, %s\n", m, FormatName(fmt));
    for (const Shape& s : shapes) {
      const QWeight w = MakeAny(fmt, s.rows, s.cols, 7);
      const Timing tm = Time(std::max(runs / 2, 5), [&](int) {
        MatMul(x.data(), s.cols, m, w.view, y.data(), s.rows, ctx);
      });
      const double flop = 2.0 * m * s.rows * s.cols;
      const double gflops = flop / tm.median_s / 1e9, best = flop / tm.best_s / 1e9;
      const double peak = roof.bf16_fma_gflops > 0 ? roof.bf16_fma_gflops : 1e30;
      std::printf(
          "  %-10s [%5zu,%5zu] %8.2f ms  %6.1f GFLOP/s = %3.0f%% of bf16 peak "
          "(best run %.1f = %.0f%%)\n",
          s.name, s.rows, s.cols, tm.median_s * 1e3, gflops, 100 * gflops / peak, best,
          100 * best / peak);
    }
    // MoE decode: 32 experts, top-8 per token (every call reads 24 new matrices).
    if (!quick) {
      const size_t E = 32, H = 3072, I = 1536, K = 8;
      std::vector<QWeight> store;
      store.reserve(3 * E);
      std::vector<ExpertWeights> ex(E);
      for (size_t e = 0; e < E; ++e) {
        store.push_back(MakeAny(fmt, I, H, 3 * e + 1));
        ex[e].w1 = store.back().view;
        store.push_back(MakeAny(fmt, I, H, 3 * e + 2));
        ex[e].w3 = store.back().view;
        store.push_back(MakeAny(fmt, H, I, 3 * e + 3));
        ex[e].w2 = store.back().view;
      }
      std::vector<int32_t> idx(K);
      std::vector<float> wts(K, 1.0f / K);
      const Timing tm = Time(runs * 2, [&](int r) {
        for (size_t j = 0; j < K; ++j) idx[j] = static_cast<int32_t>((r * K + j) % E);
        MoeExperts(x.data(), H, 1, idx.data(), wts.data(), K, ex, y.data(), H, ctx);
      });
      const double bytes = K * (2.0 * store[0].bytes + store[2].bytes);
      const double gbps = bytes / tm.median_s / 1e9;
      std::printf("MoeExperts decode %s (1 token, top-%zu of %zu) %.3f ms  %.1f GB/s = %.0f%%\n",
                  FormatName(fmt), K, E, tm.median_s * 1e3, gbps, 100 * gbps / roof.read_gbps);
    }
    std::printf("\n");
  }
  if (gemv_only) return 0;
  std::printf("Attention decode (48 q / 8 kv heads, head_dim 128, block 16)\n");
  BenchAttention(roof, ctx, runs, false);
  BenchAttention(roof, ctx, runs, true);
  return 0;
}

}  // namespace moeserve::kernels

int main(int argc, char** argv) {
  return moeserve::kernels::Main(argc, argv);
}
