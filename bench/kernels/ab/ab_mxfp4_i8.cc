// A/B of two builds of one ISA's MXFP4 x int8 kernel (MatMulMxfp4I8), interleaved call by call on
// the same data. Built and run by bench/kernels/ab/run.sh: A is the kernel file at a git revision,
// B the working tree's, both compiled with the exact command the library uses
// (compile_commands.json), in namespaces <isa>_a and <isa>_b.
//
// Why: on a shared machine two whole-model runs of one binary differ by up to 30%, more than most
// kernel changes. Here every iteration runs A, B and a plain read of the same bytes in the same
// thread split (the probe), each on the next set of matrices (so each call streams its weights
// from DRAM; --sets 1 with few matrices keeps them in the LLC), and the figure that decides is the
// median of the per-iteration A/B time ratios. Same flags matter: a scratch harness built at -O2
// once compared kernels in which GCC had dropped the software prefetches (-O3 keeps them).
//
// Also a check: A's and B's outputs must equal the scalar reference bit for bit (both ISA kernels
// promise it), for every matrix of the first set; a difference exits 1.
//
// The amx kernel (the tile unit, from 32 tokens in the engine; here at any --tokens) takes a
// worker's scratch: each thread passes its own.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../bench_timing.h"
#include "kernels/internal.h"
#include "kernels/mxfp4_i8.h"
#include "kernels/quant.h"
#include "kernels/scratch.h"
#include "runtime/cpu_features.h"
#include "runtime/huge_page_arena.h"
#include "runtime/thread_pool.h"

// run.sh defines AB_ISA (avx2, avx512 or amx) and the namespaces of the two builds, AB_A / AB_B
// (<isa>_a / <isa>_b).
#if !defined(AB_ISA) || !defined(AB_A) || !defined(AB_B)
#error "AB_ISA, AB_A and AB_B are set by bench/kernels/ab/run.sh"
#endif
#define AB_STR2(a) #a
#define AB_STR(a) AB_STR2(a)

namespace moeserve::kernels {
#ifdef AB_AMX
namespace AB_A {
void MatMulMxfp4I8(const Q8Rows& x, const WeightMatrix& w, float* y, size_t ldy, bool accumulate,
                   WorkerScratch& s);
}
namespace AB_B {
void MatMulMxfp4I8(const Q8Rows& x, const WeightMatrix& w, float* y, size_t ldy, bool accumulate,
                   WorkerScratch& s);
}
#else
namespace AB_A {
void MatMulMxfp4I8(const Q8Rows& x, const WeightMatrix& w, float* y, size_t ldy, bool accumulate);
}
namespace AB_B {
void MatMulMxfp4I8(const Q8Rows& x, const WeightMatrix& w, float* y, size_t ldy, bool accumulate);
}
#endif

namespace {

using Kernel = void (*)(const Q8Rows&, const WeightMatrix&, float*, size_t, bool);
#ifdef AB_AMX
// The calling thread's scratch (a harness of its own threads; the engine's come from its context).
WorkerScratch& ThreadScratch() {
  thread_local WorkerScratch s;
  return s;
}
template <auto kKernel>
void WithScratch(const Q8Rows& x, const WeightMatrix& w, float* y, size_t ldy, bool accumulate) {
  kKernel(x, w, y, ldy, accumulate, ThreadScratch());
}
constexpr Kernel kA = WithScratch<AB_A::MatMulMxfp4I8>;
constexpr Kernel kB = WithScratch<AB_B::MatMulMxfp4I8>;
constexpr double (*kRead)(const float*, size_t) = avx512::SumBuffer;
#else
constexpr Kernel kA = AB_A::MatMulMxfp4I8;
constexpr Kernel kB = AB_B::MatMulMxfp4I8;
constexpr double (*kRead)(const float*, size_t) = AB_ISA::SumBuffer;
#endif

struct Options {
  size_t rows = 1536, cols = 3072, tokens = 1, threads = 2, matrices = 16, sets = 24, iters = 400;
  // Each thread whole matrices (as MoeExperts' run 1 with 2 threads: w1 on one, w3 on the other).
  bool whole = false;
};

int Run(const Options& o) {
#ifdef AB_AMX
  // The tile data permission (asked once, with the features); without it a tile instruction
  // faults.
  if (!GetCpuFeatures().amx_bf16) {
    std::fprintf(stderr, "SKIPPED: no AMX tile data for this process\n");
    return 77;
  }
#endif
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  // One random matrix, repacked into every slot: the kernels' work does not depend on the codes
  // (nor on which copy is read), and repacking is the slow part of the set-up.
  std::vector<float> f(o.rows * o.cols);
  for (float& v : f) v = normal(rng);
  std::vector<uint8_t> codes(o.rows * o.cols / 2), scales(o.rows * o.cols / 32);
  QuantizeMxfp4(f.data(), o.rows, o.cols, codes.data(), scales.data());
  const WeightMatrix src{DType::kU8,           codes.data(),  o.rows,      o.cols, o.cols / 2,
                         WeightFormat::kMxfp4, scales.data(), o.cols / 32, 0,      0};
  const size_t code_bytes = Mxfp4I8CodeBytes(o.rows, o.cols);
  const size_t scale_bytes = Mxfp4I8ScaleBytes(o.rows, o.cols);
  HugePageArena arena;  // as the engine's repacked weights (model/weights.cc)
  std::vector<WeightMatrix> w;
  for (size_t i = 0; i < o.sets * o.matrices; ++i) {
    uint8_t* mem = arena.Allocate(code_bytes + scale_bytes);
    w.push_back(RepackMxfp4I8(src, mem, mem + code_bytes));
  }
  // Token rows of their own (activations differ per token, as in a batch).
  std::vector<int8_t> q(o.tokens * o.cols);
  std::vector<float> d(o.tokens * o.cols / 32), x(o.cols);
  std::vector<int32_t> sum(o.tokens * o.cols / 32);
  for (size_t t = 0; t < o.tokens; ++t) {
    for (float& v : x) v = normal(rng) * 50;
    QuantizeRowQ8Reference(x.data(), o.cols, q.data() + t * o.cols, d.data() + t * o.cols / 32,
                           sum.data() + t * o.cols / 32);
  }
  const Q8Rows xr{q.data(), d.data(), sum.data(), o.cols, o.cols / 32, o.tokens, o.cols};

  // Bit-for-bit check against the reference on the first set.
  std::vector<float> want(o.tokens * o.rows), got(o.tokens * o.rows);
  for (size_t e = 0; e < o.matrices; ++e) {
    MatMulMxfp4I8Reference(xr, w[e], want.data(), o.rows, false);
    for (const Kernel k : {kA, kB}) {
      k(xr, w[e], got.data(), o.rows, false);
      if (std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) != 0) {
        std::fprintf(stderr, "kernel %s differs from MatMulMxfp4I8Reference (matrix %zu)\n",
                     k == kA ? "A" : "B", e);
        return 1;
      }
    }
  }

  ThreadPool pool(o.threads);
  std::vector<float> y(o.matrices * o.tokens * o.rows);
  std::vector<double> sinks(pool.num_threads()), ta, tb, tp;
  size_t set = 0;
  for (size_t it = 0; it < o.iters; ++it) {
    for (int v = 0; v < 3; ++v) {
      const size_t base = (set++ % o.sets) * o.matrices;
      const double t0 = bench::Now();
      pool.Run([&](size_t t, size_t nt) {
        // Shares of 32 rows (the AVX-512 kernel's 4-group passes), or whole matrices.
        const size_t quads = (o.rows + 31) / 32, per = (quads + nt - 1) / nt;
        size_t r0 = std::min(o.rows, t * per * 32), r1 = std::min(o.rows, (t + 1) * per * 32);
        if (o.whole) r0 = 0, r1 = o.rows;
        for (size_t e = 0; e < o.matrices; ++e) {
          if ((o.whole && e % nt != t) || r1 <= r0) continue;
          const WeightMatrix m = Mxfp4I8Rows(w[base + e], r0, r1 - r0);
          if (v == 2) {  // the probe: the share's codes and scales, read as floats
            const size_t share = (code_bytes + scale_bytes) * (r1 - r0) / o.rows;
            sinks[t] += kRead(static_cast<const float*>(m.data), share / sizeof(float) / 16 * 16);
          } else {
            (v == 0 ? kA : kB)(xr, m, y.data() + e * o.tokens * o.rows + r0, o.rows, false);
          }
        }
      });
      (v == 0 ? ta : v == 1 ? tb : tp).push_back(bench::Now() - t0);
    }
  }
  std::vector<double> ratio;
  for (size_t i = 0; i < ta.size(); ++i) ratio.push_back(ta[i] / tb[i]);
  const double bytes = static_cast<double>(o.matrices) * (code_bytes + scale_bytes);
  const double ops = 2.0 * o.matrices * o.rows * o.cols * o.tokens;
  const auto line = [&](const char* name, const std::vector<double>& t, bool kernel) {
    const double med = bench::Median(t), best = *std::min_element(t.begin(), t.end());
    std::printf("%-6s %9.1f us  %6.1f GB/s (best %6.1f)", name, med * 1e6, bytes / med / 1e9,
                bytes / best / 1e9);
    if (kernel) std::printf("  %7.1f GOP/s", ops / med / 1e9);
    std::printf("\n");
  };
  std::printf(
      "isa %s, %zu threads (%s), %zu matrices [%zu x %zu] per call, %zu token(s), %zu sets "
      "(%.0f MB), %zu iterations; outputs of A and B equal the reference bit for bit\n",
      AB_STR(AB_ISA), pool.num_threads(),
      o.whole ? "whole matrices each" : "a share of every matrix each", o.matrices, o.rows, o.cols,
      o.tokens, o.sets, o.sets * bytes / 1e6, o.iters);
  line("probe", tp, false);
  line("A", ta, true);
  line("B", tb, true);
  std::printf("median A/B time ratio %.3f (> 1: B faster)\n", bench::Median(ratio));
  return 0;
}

}  // namespace
}  // namespace moeserve::kernels

int main(int argc, char** argv) {
  moeserve::kernels::Options o;
  const std::pair<const char*, size_t*> sizes[] = {
      {"--rows", &o.rows},       {"--cols", &o.cols},         {"--tokens", &o.tokens},
      {"--threads", &o.threads}, {"--matrices", &o.matrices}, {"--sets", &o.sets},
      {"--iters", &o.iters}};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--whole") {
      o.whole = true;
      continue;
    }
    size_t* value = nullptr;
    for (const auto& [name, field] : sizes)
      if (a == name) value = field;
    if (!value) {
      std::fprintf(stderr,
                   "usage: %s [--rows R] [--cols C (multiple of 32)] [--tokens M] [--threads N] "
                   "[--matrices P] [--sets S] [--iters I] [--whole]\n",
                   argv[0]);
      return 2;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", a.c_str());
      return 2;
    }
    *value = std::strtoull(argv[++i], nullptr, 10);
  }
  if (o.cols % 32 || !o.rows || !o.tokens || !o.matrices || !o.sets || !o.iters || !o.threads) {
    std::fprintf(stderr, "cols must be a multiple of 32; the other sizes at least 1\n");
    return 2;
  }
  return moeserve::kernels::Run(o);
}
