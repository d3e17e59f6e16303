// bench_moe: one MoE layer (MoeExperts) on MXFP4 experts repacked for int8 activations, the
// default path for MXFP4 checkpoints, at MiniMax-M2's expert shapes (hidden 3072, intermediate
// 1536): the gathering, x's quantization, gate / up / SiLU / w2's quantization, the down
// projection and the weighted sum, as a prefill (512 tokens) or a decode step (1 token) runs them.
// Weights are random codes and scales on huge pages, 256 experts by default (1.9 GB, so every call
// reads its experts from DRAM, as a model's layer does); each token routes to top-k distinct
// experts drawn uniformly, with a new draw every run. Prints the median time per call beside the
// machine's int8 dot peak (GOP/s: 2 · tokens · top-k · 3 · hidden · intermediate per call) and its
// read bandwidth (bytes of the experts the call touches).
//   bench_moe [--experts E] [--tokens T] [--top-k K] [--runs N] [--threads N] [--isa NAME]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "kernels/context.h"
#include "kernels/moe.h"
#include "kernels/mxfp4_i8.h"
#include "kernels/roofline.h"
#include "runtime/cpu_features.h"
#include "runtime/huge_page_arena.h"
#include "runtime/thread_pool.h"

namespace moeserve::kernels {
namespace {

constexpr size_t kHidden = 3072, kInter = 1536;

// A random MXFP4 [rows, cols] matrix (any code, scales 2^-9 .. 2^7) repacked into `arena`.
WeightMatrix RandomExpertMatrix(size_t rows, size_t cols, std::mt19937& rng, HugePageArena& arena) {
  std::vector<uint8_t> codes(rows * cols / 2), scales(rows * cols / 32);
  for (uint8_t& c : codes) c = static_cast<uint8_t>(rng());
  for (uint8_t& s : scales) s = static_cast<uint8_t>(118 + rng() % 17);
  const WeightMatrix src{DType::kU8,           codes.data(),  rows,      cols, cols / 2,
                         WeightFormat::kMxfp4, scales.data(), cols / 32, 0,    0};
  uint8_t* c8 = arena.Allocate(Mxfp4I8CodeBytes(rows, cols));
  uint8_t* s8 = arena.Allocate(Mxfp4I8ScaleBytes(rows, cols));
  return RepackMxfp4I8(src, c8, s8);
}

int Main(int argc, char** argv) {
  size_t experts = 256, tokens = 512, top_k = 8, threads = 2;
  int runs = 11;
  Isa isa = BestIsa();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--experts" && has_value)
      experts = std::strtoul(argv[++i], nullptr, 10);
    else if (a == "--tokens" && has_value)
      tokens = std::strtoul(argv[++i], nullptr, 10);
    else if (a == "--top-k" && has_value)
      top_k = std::strtoul(argv[++i], nullptr, 10);
    else if (a == "--runs" && has_value)
      runs = std::atoi(argv[++i]);
    else if (a == "--threads" && has_value)
      threads = std::strtoul(argv[++i], nullptr, 10);
    else if (a == "--isa" && has_value) {
      const auto parsed = ParseIsaName(argv[++i]);
      if (!parsed || *parsed > BestIsa()) {
        std::fprintf(stderr, "bench_moe: ISA %s unknown or not on this CPU\n", argv[i]);
        return 77;
      }
      isa = *parsed;
    } else {
      std::fprintf(stderr,
                   "usage: bench_moe [--experts E] [--tokens T] [--top-k K] [--runs N] "
                   "[--threads N] [--isa NAME]\n");
      return 2;
    }
  }
  if (experts == 0 || tokens == 0 || top_k == 0 || top_k > experts || runs < 1) {
    std::fprintf(stderr, "bench_moe: need experts >= top-k >= 1, tokens >= 1, runs >= 1\n");
    return 2;
  }
  std::mt19937 rng(1);
  HugePageArena arena;
  std::vector<ExpertWeights> ex(experts);
  for (ExpertWeights& e : ex)
    e = {RandomExpertMatrix(kInter, kHidden, rng, arena),
         RandomExpertMatrix(kInter, kHidden, rng, arena),
         RandomExpertMatrix(kHidden, kInter, rng, arena)};
  const double expert_bytes =
      2.0 * (Mxfp4I8CodeBytes(kInter, kHidden) + Mxfp4I8ScaleBytes(kInter, kHidden)) +
      Mxfp4I8CodeBytes(kHidden, kInter) + Mxfp4I8ScaleBytes(kHidden, kInter);

  // A routing per run (the warm-up's too), so that a decode step's few experts change between
  // runs as in a model's layers and come from DRAM; bytes: the experts each call touches.
  std::vector<std::vector<int32_t>> routing(runs + 1, std::vector<int32_t>(tokens * top_k));
  std::vector<int32_t> order(experts);
  double touched_experts = 0;
  for (std::vector<int32_t>& idx : routing) {
    std::vector<bool> touched(experts, false);
    for (size_t t = 0; t < tokens; ++t) {
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      std::copy(order.begin(), order.begin() + top_k, idx.begin() + t * top_k);
      for (size_t j = 0; j < top_k; ++j) touched[order[j]] = true;
    }
    touched_experts += std::count(touched.begin(), touched.end(), true);
  }
  const double bytes = expert_bytes * touched_experts / (runs + 1);
  std::vector<float> x(tokens * kHidden), y(tokens * kHidden), w(tokens * top_k, 1.0f / top_k);
  std::normal_distribution<float> normal;
  for (float& v : x) v = normal(rng);

  ThreadPool pool(threads);
  KernelContext ctx(pool, isa);
  const Roofline roof = MeasureRoofline(ctx);
  const bench::Timing tm = bench::Time(runs, [&](int r) {
    MoeExperts(x.data(), kHidden, tokens, routing[r].data(), w.data(), top_k, ex, y.data(), kHidden,
               ctx);
  });
  const double gops = 2.0 * tokens * top_k * 3 * kHidden * kInter / tm.median_s / 1e9;
  const double gbps = bytes / tm.median_s / 1e9;
  std::printf("isa %s, %zu threads: %zu experts (MXFP4 x int8), %zu tokens, top-%zu\n",
              IsaName(isa).c_str(), pool.num_threads(), experts, tokens, top_k);
  std::printf(
      "MoeExperts %.3f ms (median of %d, best %.3f) = %.1f GOP/s = %.0f%% of the int8 dot "
      "peak %.0f; experts' bytes %.1f GB/s = %.0f%% of the read bandwidth %.1f\n",
      tm.median_s * 1e3, runs, tm.best_s * 1e3, gops, 100 * gops / roof.int8_dot_gops,
      roof.int8_dot_gops, gbps, 100 * gbps / roof.read_gbps, roof.read_gbps);
  return 0;
}

}  // namespace
}  // namespace moeserve::kernels

int main(int argc, char** argv) {
  return moeserve::kernels::Main(argc, argv);
}
