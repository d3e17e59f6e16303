// bench_attention: paged causal GQA attention on the MiniMax-M2 geometry (48 q heads, 8 kv heads,
// head_dim 128, block 16), bf16 and FP8 KV caches, beside this machine's measured roofline.
//   decode:  8 seqs x 4096 cached tokens, and 1 seq x 32768 (K+V far beyond the LLC): GB/s of
//            K+V read against the read roofline, and GFLOP/s against the f32 FMA peak; and
//            1 seq x 32768 with one kv head of 6 q heads (a tp-8 rank's share of MiniMax-M2: one
//            work item unless Attention splits its keys; a different one of 16 each run);
//   prefill: one 512-token prompt (causal, no context), and one of 4096 tokens (not --quick: a
//            long prompt's attention, whose share of a prefill grows with its length, K / V of
//            a kv head past L2): GFLOP/s against the f32 FMA peak, and on amx against the tile
//            unit's (its kernel: three bf16 products per f32 one).
// FLOPs count 4 · head_dim per (q head, visible key): q·k and p·v, one multiply-add each.
// Median (and best) of the runs.
//   hot:     (--hot only) decode 1 seq x 512 tokens, K+V (2 MB bf16) resident in L2 after the
//            first run: the tile's compute rate, without DRAM (run it pinned with --threads 1).
//   bench_attention [--runs N] [--threads N] [--quick] [--hot] [--outlier-channels]
//   (--quick: bf16 only, no 32k decode, no 4096-token prefill)
//   --outlier-channels: K and V rows N(0, 1) with 4 of each head's 128 channels 30x the others
//            (as real models' keys have), so that a row's FP8 scale leaves its small values as
//            e4m3 subnormal codes (~0.2%; by default values are uniform in [-1, 1], none
//            subnormal).
// MOESERVE_ISA=avx2 (or scalar) runs the generic tile for comparison.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "bench_timing.h"
#include "kernels/attention.h"
#include "kernels/quant.h"
#include "kernels/roofline.h"
#include "runtime/cpu_features.h"
#include "runtime/huge_page_arena.h"
#include "runtime/thread_pool.h"

namespace moeserve::kernels {
namespace {

using bench::Now;
using bench::Time;
using bench::Timing;

// A paged KV cache holding `seqs` sequences of kv_len tokens each, blocks in shuffled order, in
// bf16 or FP8 (WriteKvRowFp8) with values uniform in [-1, 1]. The pools are on huge pages, as the
// engine's cache (cache/resident_memory.cc): with 4 KiB pages a kv head's rows of one block span 8
// pages, and the TLB misses, not the kernel, set the time.
// Bytes from a HugePageArena, with the vector calls the cache below uses.
class HugeBytes {
 public:
  void resize(size_t n) {
    data_ = arena_.Allocate(n);
    size_ = n;
  }
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  HugePageArena arena_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

bool g_outlier_channels = false;

struct PagedCache {
  size_t block_bytes = 0;
  HugeBytes k_pool, v_pool;
  std::vector<const uint8_t*> k8, v8;
  std::vector<const bf16*> k16, v16;
  std::vector<AttentionSeq> seqs16;
  std::vector<AttentionSeq> seqs8;

  PagedCache(const AttentionShape& s, size_t seqs, size_t q_len, size_t kv_len, bool fp8) {
    const size_t per_seq = (kv_len + s.block_size - 1) / s.block_size, blocks = seqs * per_seq;
    const size_t elems = s.block_size * s.num_kv_heads * s.head_dim;
    block_bytes = fp8 ? KvBlockBytesFp8(s.block_size, s.num_kv_heads, s.head_dim) : elems * 2;
    k_pool.resize(blocks * block_bytes);
    v_pool.resize(blocks * block_bytes);
    std::mt19937 rng(9);
    auto uniform = [&] { return (static_cast<int>(rng() % 2001) - 1000) * 1e-3f; };
    std::normal_distribution<float> normal(0.0f, 1.0f);
    // Element i of a row (heads x head_dim) or of the pool: channel i % head_dim.
    auto value = [&](size_t i) {
      if (!g_outlier_channels) return uniform();
      return i % s.head_dim % 32 == 0 ? 30 * normal(rng) : normal(rng);
    };
    if (fp8) {
      std::vector<float> row(s.num_kv_heads * s.head_dim);
      for (size_t b = 0; b < blocks; ++b)
        for (size_t r = 0; r < s.block_size; ++r)
          for (auto* pool : {&k_pool, &v_pool}) {
            for (size_t i = 0; i < row.size(); ++i) row[i] = value(i);
            WriteKvRowFp8(row.data(), s.num_kv_heads, s.head_dim, s.block_size, r,
                          pool->data() + b * block_bytes);
          }
    } else {
      for (auto* pool : {&k_pool, &v_pool})
        for (size_t i = 0; i < blocks * elems; ++i) {
          const bf16 x = F32ToBf16(value(i));
          std::memcpy(pool->data() + 2 * i, &x, 2);
        }
    }
    std::vector<size_t> order(blocks);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i = 0; i < blocks; ++i) {
      k8.push_back(k_pool.data() + order[i] * block_bytes);
      v8.push_back(v_pool.data() + order[i] * block_bytes);
      k16.push_back(reinterpret_cast<const bf16*>(k8.back()));
      v16.push_back(reinterpret_cast<const bf16*>(v8.back()));
    }
    for (size_t i = 0; i < seqs; ++i) {
      seqs8.push_back(
          {i * q_len, q_len, kv_len, nullptr, nullptr, &k8[i * per_seq], &v8[i * per_seq]});
      seqs16.push_back({i * q_len, q_len, kv_len, &k16[i * per_seq], &v16[i * per_seq]});
    }
  }
  double Bytes() const { return static_cast<double>(k_pool.size() + v_pool.size()); }
};

void Run(const char* name, const AttentionShape& s, size_t seqs, size_t q_len, size_t kv_len,
         bool fp8, const Roofline& roof, KernelContext& ctx, int runs) {
  const PagedCache cache(s, seqs, q_len, kv_len, fp8);
  const size_t width = s.num_heads * s.head_dim;
  std::mt19937 rng(3);
  std::vector<float> q(seqs * q_len * width), out(seqs * q_len * width);
  for (float& v : q) v = (static_cast<int>(rng() % 2001) - 1000) * 1e-3f;
  const Timing tm = Time(runs, [&](int) {
    Attention(q.data(), width, fp8 ? cache.seqs8 : cache.seqs16, s, out.data(), width, ctx);
  });
  double visible = 0;  // (query, key) pairs, per q head
  for (size_t i = 0; i < q_len; ++i) visible += kv_len - q_len + i + 1;
  const double flop = 4.0 * s.head_dim * s.num_heads * visible * seqs;
  const double gflops = flop / tm.median_s / 1e9, best_gflops = flop / tm.best_s / 1e9;
  std::printf("  %-30s %-4s %8.2f ms (best %.2f)  %6.1f GFLOP/s = %3.0f%% of f32 FMA peak", name,
              fp8 ? "fp8" : "bf16", tm.median_s * 1e3, tm.best_s * 1e3, gflops,
              100 * gflops / roof.f32_fma_gflops);
  if (q_len == 1) {
    const double gbps = cache.Bytes() / tm.median_s / 1e9, best = cache.Bytes() / tm.best_s / 1e9;
    std::printf("  %6.1f GB/s = %3.0f%% of read roofline (best %.1f GB/s)  [%.0f MB K+V]", gbps,
                100 * gbps / roof.read_gbps, best, cache.Bytes() / 1e6);
  } else {
    std::printf("  (best %.1f GFLOP/s)", best_gflops);
    // On amx prefill runs on the tile unit, each f32 product as three bf16 ones
    // (attention_amx.cc): its roofline is a third of the TDPBF16PS peak.
    if (roof.bf16_tile_gflops > 0)
      std::printf("  = %3.0f%% of the tile peak / 3 (%.0f GFLOP/s)",
                  100 * gflops / (roof.bf16_tile_gflops / 3), roof.bf16_tile_gflops / 3);
  }
  std::printf("\n");
}

// One decode sequence per call, a different one of `seqs` each run, so that its K+V comes from
// memory although one alone fits the LLC (a lone sequence: one work item per kv head).
void RunRotating(const char* name, const AttentionShape& s, size_t seqs, size_t kv_len, bool fp8,
                 const Roofline& roof, KernelContext& ctx, int runs) {
  const PagedCache cache(s, seqs, 1, kv_len, fp8);
  const size_t width = s.num_heads * s.head_dim;
  std::mt19937 rng(3);
  std::vector<float> q(width), out(width);
  for (float& v : q) v = (static_cast<int>(rng() % 2001) - 1000) * 1e-3f;
  const std::vector<AttentionSeq>& all = fp8 ? cache.seqs8 : cache.seqs16;
  const Timing tm = Time(runs, [&](int r) {
    AttentionSeq one = all[static_cast<size_t>(r) % seqs];
    one.q_begin = 0;
    Attention(q.data(), width, std::span<const AttentionSeq>(&one, 1), s, out.data(), width, ctx);
  });
  const double bytes = cache.Bytes() / seqs;
  const double flop = 4.0 * s.head_dim * s.num_heads * kv_len;
  std::printf(
      "  %-30s %-4s %8.2f ms (best %.2f)  %6.1f GFLOP/s = %3.0f%% of f32 FMA peak  %6.1f GB/s = "
      "%3.0f%% of read roofline (best %.1f GB/s)  [%.0f MB K+V, %zu key ranges]\n",
      name, fp8 ? "fp8" : "bf16", tm.median_s * 1e3, tm.best_s * 1e3, flop / tm.median_s / 1e9,
      100 * flop / tm.median_s / 1e9 / roof.f32_fma_gflops, bytes / tm.median_s / 1e9,
      100 * bytes / tm.median_s / 1e9 / roof.read_gbps, bytes / tm.best_s / 1e9, bytes / 1e6,
      AttentionKeySplits(std::span<const AttentionSeq>(all.data(), 1), s, ctx.pool().num_threads(),
                         0));
}

}  // namespace

int Main(int argc, char** argv) {
  int runs = 7;
  size_t threads = 0;
  bool quick = false, hot = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc)
      runs = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--hot"))
      hot = true;
    else if (!std::strcmp(argv[i], "--outlier-channels"))
      g_outlier_channels = true;
  }
  ThreadPool pool(threads);
  KernelContext ctx(pool);
  std::printf("isa %s, %zu threads, median of %d runs\n", IsaName(BestIsa()).c_str(),
              pool.num_threads(), runs);
  const Roofline roof = MeasureRoofline(ctx);
  std::printf("roofline: read %.1f GB/s, f32 FMA %.0f GFLOP/s\n", roof.read_gbps,
              roof.f32_fma_gflops);
  const AttentionShape s{48, 8, 128, 16, 1 / std::sqrt(128.0f)};
  std::printf("attention: %zu q heads / %zu kv heads, head_dim %zu, block %zu\n", s.num_heads,
              s.num_kv_heads, s.head_dim, s.block_size);
  for (const bool fp8 : {false, true}) {
    if (quick && fp8) break;
    if (hot) {
      Run("decode 1 seq x 512, hot", s, 1, 1, 512, fp8, roof, ctx, runs);
      continue;
    }
    Run("decode 8 seqs x 4096 tokens", s, 8, 1, 4096, fp8, roof, ctx, runs);
    if (!quick) Run("decode 1 seq x 32768 tokens", s, 1, 1, 32768, fp8, roof, ctx, runs);
    if (!quick) {
      const AttentionShape rank{6, 1, 128, 16, s.scale};
      RunRotating("decode 1 x 32768, 1 kv head", rank, 16, 32768, fp8, roof, ctx,
                  std::max(runs, 16));
    }
    Run("prefill 512 tokens", s, 1, 512, 512, fp8, roof, ctx, runs);
    if (!quick) Run("prefill 4096 tokens", s, 1, 4096, 4096, fp8, roof, ctx, runs);
  }
  return 0;
}

}  // namespace moeserve::kernels

int main(int argc, char** argv) {
  return moeserve::kernels::Main(argc, argv);
}
