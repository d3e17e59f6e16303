// FP8-block weights repacked in 16-row panels (fp8_panels.h): the repack keeps every element of
// tensor-parallel views (rows and columns starting anywhere inside a 128 x 128 scale block), and
// MatMul / MoeExperts on the panels match the references on the kFp8Block originals on every ISA.
#include "kernels/fp8_panels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/internal.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "kernels/moe.h"
#include "kernels/quant.h"
#include "test_util.h"

namespace moeserve::kernels {
namespace {

using testing::ExpectTokensTogetherEqualAlone;
using testing::RandomF32;
using testing::SumTolerance;

MOESERVE_EVERY_ISA_SUITE(Fp8PanelsEveryIsa);

struct Fp8 {
  std::vector<uint8_t> q;
  std::vector<float> scales;
  size_t rows, cols;
  // Rows [r0, r0 + n) x cols [c0, c0 + m) of the whole weight.
  WeightMatrix View(size_t r0, size_t n, size_t c0, size_t m) const {
    return {DType::kF8E4M3, q.data() + r0 * cols + c0, n,  m, cols, WeightFormat::kFp8Block,
            scales.data(),  (cols + 127) / 128,        r0, c0};
  }
};

Fp8 RandomFp8(size_t rows, size_t cols, std::mt19937& rng) {
  Fp8 f{std::vector<uint8_t>(rows * cols),
        std::vector<float>(((rows + 127) / 128) * ((cols + 127) / 128)), rows, cols};
  // Blocks of very different magnitudes, so a wrong scale block is visible.
  std::vector<float> w = RandomF32(rows * cols, rng);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c)
      w[r * cols + c] *= std::ldexp(1.0f, static_cast<int>((r / 128 + 3 * (c / 128)) % 7) - 3);
  QuantizeFp8Block(w.data(), rows, cols, f.q.data(), f.scales.data());
  return f;
}

struct Panels {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  WeightMatrix view;
};

Panels Repack(const WeightMatrix& src) {
  Panels p;
  p.codes.assign(Fp8PanelCodeBytes(src.rows, src.cols), 0xee);
  p.scales.assign(Fp8PanelScaleFloats(src.rows, src.cols, src.col0), -1.0f);
  p.view = RepackFp8Panels(src, p.codes.data(), p.scales.data());
  return p;
}

TEST(Fp8Panels, RepackKeepsEveryElementOfViewsInsideScaleBlocks) {
  std::mt19937 rng(1);
  const Fp8 f = RandomFp8(300, 400, rng);
  for (auto [r0, n, c0, m] : {std::array<size_t, 4>{0, 300, 0, 400},
                              {5, 37, 70, 200},
                              {120, 17, 127, 2},
                              {250, 50, 300, 100}}) {
    const WeightMatrix src = f.View(r0, n, c0, m);
    ASSERT_TRUE(Fp8PanelRepackable(src));
    const Panels p = Repack(src);
    std::vector<float> want(m);
    for (size_t r = 0; r < n; ++r) {
      DequantizeRow(src, r, 0, m, want.data());
      for (size_t c = 0; c < m; ++c)
        ASSERT_EQ(Fp8PanelElement(p.view, r, c), want[c])
            << r0 << "+" << r << ", " << c0 << "+" << c;
    }
  }
}

TEST(Fp8Panels, NanCodesAreNotRepackable) {
  std::mt19937 rng(2);
  Fp8 f = RandomFp8(20, 40, rng);
  EXPECT_TRUE(Fp8PanelRepackable(f.View(0, 20, 0, 40)));
  f.q[7 * 40 + 33] = 0xff;
  EXPECT_FALSE(Fp8PanelRepackable(f.View(0, 20, 0, 40)));
  EXPECT_TRUE(Fp8PanelRepackable(f.View(0, 7, 0, 40)));  // the NaN is outside this view
}

// Every code (all 254 finite e4m3 values, subnormals included) decodes exactly in the kernels.
TEST_P(Fp8PanelsEveryIsa, EveryFiniteCodeExact) {
  ThreadPool pool(1);
  KernelContext ctx(pool, isa());
  const size_t rows = 16, cols = 256;
  std::vector<uint8_t> q(rows * cols);
  for (size_t i = 0; i < q.size(); ++i) {
    uint8_t code = static_cast<uint8_t>(i % 256);
    if ((code & 0x7f) == 0x7f) code = 0x01;
    q[i] = code;
  }
  std::vector<float> scales = {1.0f, 0.5f};
  const WeightMatrix src{DType::kF8E4M3,          q.data(),      rows, cols, cols,
                         WeightFormat::kFp8Block, scales.data(), 2,    0,    0};
  const Panels p = Repack(src);
  const Isa isa = GetParam();
  for (size_t c = 0; c < cols; ++c) {
    // x = e_c (a power of two, exact in bf16) picks column c: y = W[:, c] exactly.
    std::vector<float> x(cols, 0.0f), y(rows), ref(rows);
    x[c] = 1.0f;
    MatMul(x.data(), cols, 1, p.view, y.data(), rows, ctx);
    MatMulReference(x.data(), cols, 1, src, ref.data(), rows);
    for (size_t r = 0; r < rows; ++r)
      ASSERT_EQ(y[r], ref[r]) << IsaName(isa) << " code " << int(q[r * cols + c]);
  }
}

TEST_P(Fp8PanelsEveryIsa, MatMulMatchesBlockReference) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  const Fp8 f = RandomFp8(300, 400, rng);
  const Isa isa = GetParam();
  for (size_t m : {1, 2, 3, 4, 7, 11, 13, 24, 200, 300}) {
    // {100, 77, 96, 293}: the AMX tiles' view (col0 % 32 == 0) with a one-step first scale block,
    // panel pairs and an odd last panel, rows across the 128-row scale boundary, odd k.
    // {20, 45, 4, 251}, {3, 29, 8, 130}: the amx byte-table GEMV's views (col0 % 4 == 0) off the
    // tile steps, their last 4-column group cut to 3 and 2 columns.
    for (auto [r0, n, c0, k] : {std::array<size_t, 4>{5, 37, 70, 300},
                                {0, 16, 0, 400},
                                {130, 50, 1, 129},
                                {100, 77, 96, 293},
                                {20, 45, 4, 251},
                                {3, 29, 8, 130}}) {
      const WeightMatrix src = f.View(r0, n, c0, k);
      const Panels p = Repack(src);
      const size_t ldx = k + 3, ldy = n + 1;
      const std::vector<float> x = RandomF32(m * ldx, rng, -2, 2);
      for (bool accumulate : {false, true}) {
        std::vector<float> y(m * ldy, 0.5f), ref(m * ldy, 0.5f);
        MatMul(x.data(), ldx, m, p.view, y.data(), ldy, ctx, accumulate);
        MatMulReference(x.data(), ldx, m, src, ref.data(), ldy, accumulate);
        std::vector<float> row(k);
        for (size_t r = 0; r < ldy; ++r) {
          if (r < n) DequantizeRow(src, r, 0, k, row.data());
          for (size_t t = 0; t < m; ++t) {
            const size_t i = t * ldy + r;
            if (r >= n) {
              ASSERT_EQ(y[i], 0.5f) << "wrote past the rows";
              continue;
            }
            double abs_sum = 0.5;
            for (size_t c = 0; c < k; ++c)
              abs_sum += std::fabs(double(RoundToBf16(x[t * ldx + c])) * row[c]);
            // Scales applied per block sum instead of per weight: one more rounding per term.
            ASSERT_NEAR(y[i], ref[i], 2 * SumTolerance(k, abs_sum))
                << IsaName(isa) << " m " << m << " view " << r0 << "," << c0 << " acc "
                << accumulate << " t " << t << " r " << r;
          }
        }
      }
    }
  }
}

// A prefill's x over several of the GEMM's token blocks (128 tokens each at k = 4096 on amx):
// whole-x calls hand out (token block, row chunk) items, the last block here 2 tokens, which the
// tile kernel takes from the call's packed tiles; rows in several chunks, an odd last panel.
TEST_P(Fp8PanelsEveryIsa, MatMulOverSeveralTokenBlocksMatchesBlockReference) {
  std::mt19937 rng(11);
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  const size_t m = 258, n = 72, k = 4096;
  const Fp8 f = RandomFp8(n, k, rng);
  const WeightMatrix src = f.View(0, n, 0, k);
  const Panels p = Repack(src);
  const std::vector<float> x = RandomF32(m * k, rng, -2, 2);
  std::vector<float> y(m * n), ref(m * n);
  MatMul(x.data(), k, m, p.view, y.data(), n, ctx);
  MatMulReference(x.data(), k, m, src, ref.data(), n, false);
  std::vector<float> row(k);
  for (size_t r = 0; r < n; ++r) {
    DequantizeRow(src, r, 0, k, row.data());
    for (size_t t = 0; t < m; ++t) {
      double abs_sum = 0;
      for (size_t c = 0; c < k; ++c)
        abs_sum += std::fabs(double(RoundToBf16(x[t * k + c])) * row[c]);
      ASSERT_NEAR(y[t * n + r], ref[t * n + r], 2 * SumTolerance(k, abs_sum))
          << IsaName(GetParam()) << " t " << t << " r " << r;
    }
  }
}

// One thread, so that one kernel call takes every row: 530 rows (34 panels) pass the panel GEMMs'
// decoded blocks (avx512: 32 panels; AVX2: 16 once x outgrows L2, at 300 tokens) with an odd last
// panel, and 300 columns (from column 70) their 256-column block, which then starts inside a
// scale block.
TEST_P(Fp8PanelsEveryIsa, MatMulOverSeveralPanelBlocksMatchesBlockReference) {
  std::mt19937 rng(12);
  ThreadPool pool(1);
  KernelContext ctx(pool, isa());
  const size_t n = 530, c0 = 70, k = 300;
  const Fp8 f = RandomFp8(n, c0 + k, rng);
  const WeightMatrix src = f.View(0, n, c0, k);
  const Panels p = Repack(src);
  std::vector<float> row(k);
  for (size_t m : {13, 300}) {
    const std::vector<float> x = RandomF32(m * k, rng, -2, 2);
    std::vector<float> y(m * n), ref(m * n);
    MatMul(x.data(), k, m, p.view, y.data(), n, ctx);
    MatMulReference(x.data(), k, m, src, ref.data(), n, false);
    for (size_t r = 0; r < n; ++r) {
      DequantizeRow(src, r, 0, k, row.data());
      for (size_t t = 0; t < m; ++t) {
        double abs_sum = 0;
        for (size_t c = 0; c < k; ++c)
          abs_sum += std::fabs(double(RoundToBf16(x[t * k + c])) * row[c]);
        ASSERT_NEAR(y[t * n + r], ref[t * n + r], 2 * SumTolerance(k, abs_sum))
            << IsaName(GetParam()) << " m " << m << " t " << t << " r " << r;
      }
    }
  }
}

// y of an FP8 panel GEMV (got) against a reference one's (want), bit for bit, on the given views
// (r0, n, c0, k) of a random weight, for 1 to max_m tokens, with and without accumulate. Both
// take x rows (ld apart) rounded to bf16, as the kernels do.
template <typename Want, typename Got>
void ExpectGemvsEqualBitForBit(const std::vector<std::array<size_t, 4>>& views, size_t max_m,
                               const Want& want_gemv, const Got& got_gemv) {
  std::mt19937 rng(6);
  const Fp8 f = RandomFp8(300, 400, rng);
  for (auto [r0, n, c0, k] : views) {
    const Panels p = Repack(f.View(r0, n, c0, k));
    for (size_t m = 1; m <= max_m; ++m) {
      const size_t ld = k + 5, ldy = n + 3;
      std::vector<float> x = RandomF32(m * ld, rng, -2, 2);
      for (float& v : x) v = RoundToBf16(v);  // the rounded rows both kernels take
      for (bool accumulate : {false, true}) {
        std::vector<float> want(m * ldy, 0.5f), got(m * ldy, 0.5f);
        want_gemv(x.data(), ld, m, p.view, want.data(), ldy, accumulate);
        got_gemv(x.data(), ld, m, p.view, got.data(), ldy, accumulate);
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_EQ(std::memcmp(&want[i], &got[i], 4), 0)
              << "view " << r0 << "," << c0 << " m " << m << " acc " << accumulate << " i " << i
              << ": " << want[i] << " vs " << got[i];
      }
    }
  }
}

// avx2::MatMulFp8Panels on x packed for it as MatMul does.
void Avx2Fp8Panels(const float* x, size_t ld, size_t m, const WeightMatrix& w, float* y, size_t ldy,
                   bool accumulate) {
  ScratchBuffer xp_buf, pack_buf;  // the AVX2 kernel's aligned scratch
  float* xp = xp_buf.As<float>(avx2::PackedXFloats(m, w.cols));
  avx2::PackX(x, ld, m, w.cols, xp);
  float* pack = pack_buf.As<float>(avx2::Fp8PanelPackFloats(w.cols));
  avx2::MatMulFp8Panels(xp, m, w, y, ldy, accumulate, pack);
}

// The same against the AVX2 kernel's register tiles (1 to 12 tokens: above, it scales each weight
// before an f32 GEMM), up to the 7 tokens of the avx512 GEMV.
template <typename Gemv>
void ExpectGemvEqualsAvx2BitForBit(const std::vector<std::array<size_t, 4>>& views,
                                   const Gemv& gemv) {
  ExpectGemvsEqualBitForBit(views, 7, Avx2Fp8Panels, gemv);
}

// Why the avx512 table's affine FP8 kernel cannot run here (AVX-512 with VBMI and GFNI), or "".
std::string AffineFp8Missing() {
  const CpuFeatures& cpu = GetCpuFeatures();
  if (MachineIsa() >= Isa::kAvx512 && cpu.avx512_vbmi && cpu.gfni) return "";
  return "this machine lacks AVX-512 VBMI / GFNI (it runs " + IsaName(MachineIsa()) + ")";
}

// The AVX-512 f32 FP8 panel GEMV (the avx512 table's below 8 tokens, the amx table's for views
// off its 4- and 32-column steps) is the AVX2 kernel's register-tile arithmetic lane for lane: the
// same y bit for bit where the AVX2 kernel uses its tiles (m <= 6; above, it scales each weight
// before an f32 GEMM), for views off the scale blocks, odd panels.
TEST(Fp8Panels, Avx512GemvEqualsAvx2BitForBit) {
  if (MachineIsa() < Isa::kAvx512)
    GTEST_SKIP() << "avx512 is not available on this machine (it runs " << IsaName(MachineIsa())
                 << ")";
  ExpectGemvEqualsAvx2BitForBit(
      {{5, 37, 70, 300}, {0, 64, 0, 400}, {130, 50, 1, 129}, {100, 77, 96, 293}},
      avx512::GemvFp8Panels);
}

// The AVX2 kernel's register tiles take up to 12 tokens (two x tiles, each decoding the panel
// again): every token's y is the one it gets alone, bit for bit, at every m up to 12, on views off
// the scale blocks, odd panels, with and without accumulate.
TEST(Fp8Panels, Avx2UpTo12TokensEqualsEachTokenAlone) {
  if (MachineIsa() < Isa::kAvx2)
    GTEST_SKIP() << "avx2 is not available on this machine (it runs " << IsaName(MachineIsa())
                 << ")";
  auto each_alone = [](const float* x, size_t ld, size_t m, const WeightMatrix& w, float* y,
                       size_t ldy, bool accumulate) {
    for (size_t t = 0; t < m; ++t)
      Avx2Fp8Panels(x + t * ld, ld, 1, w, y + t * ldy, ldy, accumulate);
  };
  ExpectGemvsEqualBitForBit({{5, 37, 70, 300}, {0, 64, 0, 400}, {130, 50, 1, 129}}, 12, each_alone,
                            Avx2Fp8Panels);
}

// The avx512 table's GEMV on VBMI / GFNI cores (codes decoded by GF(2)-affine maps, e4m3 values
// instead of e4m3 · 2^-8) keeps the same bits, on views from 4-column groups: a last group cut to
// 1-3 columns, scale blocks cut by the view, odd panels. (Every code, zero and subnormal ones
// included: EveryFiniteCodeExact through the table.)
TEST(Fp8Panels, Avx512AffineGemvEqualsAvx2BitForBit) {
  if (const std::string why = AffineFp8Missing(); !why.empty()) GTEST_SKIP() << why;
  ExpectGemvEqualsAvx2BitForBit(
      {{0, 64, 0, 400}, {100, 77, 96, 293}, {20, 45, 4, 251}, {3, 29, 8, 130}, {7, 16, 124, 9}},
      avx512::GemvFp8PanelsAffine);
}

// From 5 tokens (a batched decode's experts) the affine GEMV keeps its scale blocks' running sums
// in L1 (and an odd last panel runs alone): the same y as the fp16 route's register tiles bit for
// bit at every GEMV size, 1-7 tokens, on the views above, with and without accumulate.
TEST(Fp8Panels, Avx512AffineGemvEqualsFp16RouteBitForBitUpTo7Tokens) {
  if (const std::string why = AffineFp8Missing(); !why.empty()) GTEST_SKIP() << why;
  ExpectGemvsEqualBitForBit(
      {{0, 64, 0, 400}, {100, 77, 96, 293}, {20, 45, 4, 251}, {7, 16, 124, 9}},
      avx512::kFp8AffineGemvMaxTokens, avx512::GemvFp8Panels, avx512::GemvFp8PanelsAffine);
}

// The affine kernel also takes 8-16 tokens (the avx512 table's FP8 rows up to 16 tokens, in token
// groups of at most 8 per panel): every token's row of y is the one it gets alone, bit for bit,
// at every m up to 16 (groups of 5 + 4 ... 8 + 8), on the views above, with and without
// accumulate.
TEST(Fp8Panels, Avx512AffineKernelUpTo16TokensEqualsEachTokenAlone) {
  if (const std::string why = AffineFp8Missing(); !why.empty()) GTEST_SKIP() << why;
  auto each_alone = [](const float* x, size_t ld, size_t m, const WeightMatrix& w, float* y,
                       size_t ldy, bool accumulate) {
    for (size_t t = 0; t < m; ++t)
      avx512::GemvFp8PanelsAffine(x + t * ld, ld, 1, w, y + t * ldy, ldy, accumulate);
  };
  ExpectGemvsEqualBitForBit({{0, 64, 0, 400}, {100, 77, 96, 293}, {7, 16, 124, 9}},
                            avx512::kFp8AffineMaxTokens, each_alone, avx512::GemvFp8PanelsAffine);
}

// Through MatMul (the tables' dispatch), a token's y is the same bits alone or in a batch of any
// size on the avx2 and avx512 tables: the AVX2 register tiles (two 6-token tiles), the avx512 GEMV
// (two 7-token calls; views off a 4-column group), the affine kernel (up to 16; VBMI / GFNI cores,
// views on one) and, above them, the GEMMs on decoded blocks, which sum each scale block before
// scaling it as the GEMVs do (fp8_panels.h). The views start off a scale block (c0 = 70) so that
// the GEMMs' column blocks must end on the weight's scale blocks, not the view's; 130 tokens of
// 1000 columns take the AVX2 GEMM's 256-column blocks (x past its L2 budget).
TEST_P(Fp8PanelsEveryIsa, MatMulTokensTogetherEqualTokensAlone) {
  const Isa isa = GetParam();
  if (isa != Isa::kAvx2 && isa != Isa::kAvx512)
    GTEST_SKIP() << IsaName(isa) << ": claimed for the avx2 and avx512 tables";
  std::mt19937 rng(9);
  ThreadPool pool(2);
  KernelContext ctx(pool, isa);
  const Fp8 f = RandomFp8(300, 1100, rng);
  for (auto [r0, n, c0, k] :
       {std::array<size_t, 4>{5, 37, 70, 300}, {0, 64, 0, 400}, {16, 50, 70, 1000}})
    for (size_t m : {2, 7, 8, 12, 13, 17, 25, 40, 130}) {
      if (m == 130 && k < 1000) continue;
      const Panels p = Repack(f.View(r0, n, c0, k));
      const std::string what =
          IsaName(isa) + " view " + std::to_string(r0) + "," + std::to_string(c0);
      const std::vector<float> x = RandomF32(m * k, rng, -2, 2);
      ExpectTokensTogetherEqualAlone(x, m, p.view, ctx, what);
      if (HasFatalFailure()) return;
      // Added into y: y + Σ, alone or together.
      ExpectTokensTogetherEqualAlone(x, m, p.view, ctx, what, RandomF32(m * n, rng, -4, 4));
      if (HasFatalFailure()) return;
    }
}

// x packed once for the whole call (MatMul's path on AVX2) or by each thread from the rounded
// rows (MoeExperts' row views) must give the same y exactly.
TEST_P(Fp8PanelsEveryIsa, XPackedOnceEqualsXPackedPerThread) {
  std::mt19937 rng(7);
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  const Fp8 f = RandomFp8(300, 400, rng);
  const Isa isa = GetParam();
  for (size_t m : {1, 2, 6, 7, 13, 200})
    for (auto [r0, n, c0, k] : {std::array<size_t, 4>{5, 37, 70, 300}, {130, 50, 1, 129}}) {
      const Panels p = Repack(f.View(r0, n, c0, k));
      const size_t ldx = k + 3;
      const std::vector<float> x = RandomF32(m * ldx, rng, -2, 2);
      std::vector<float> whole(m * n), rows_path(m * n);
      MatMul(x.data(), ldx, m, p.view, whole.data(), n, ctx);
      ScratchBuffer buf;
      const PreparedX px =
          PrepareXParallel(ctx, p.view, x.data(), ldx, nullptr, m, k, buf).Rows(0, m);
      pool.ParallelForWithThread(
          n, MatMulRowGrain(ctx, p.view, m), [&](size_t n0, size_t n1, size_t thread) {
            MatMulRows(ctx, px, p.view, n0, n1, rows_path.data(), n, false, ctx.worker(thread));
          });
      for (size_t i = 0; i < whole.size(); ++i)
        ASSERT_EQ(std::memcmp(&whole[i], &rows_path[i], 4), 0)
            << IsaName(isa) << " m " << m << " view " << r0 << "," << c0 << " i " << i;
    }
}

TEST_P(Fp8PanelsEveryIsa, MoeExpertsMatchesBlockReference) {
  std::mt19937 rng(4);
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  const size_t hidden = 160, inter = 40, experts = 3, top_k = 2;
  std::vector<Fp8> raw;
  std::vector<Panels> packed;
  std::vector<ExpertWeights> block(experts), panel(experts);
  for (size_t e = 0; e < experts; ++e) {
    raw.push_back(RandomFp8(inter, hidden, rng));
    raw.push_back(RandomFp8(inter, hidden, rng));
    raw.push_back(RandomFp8(hidden, inter, rng));
  }
  for (size_t e = 0; e < experts; ++e) {
    block[e] = {raw[3 * e].View(0, inter, 0, hidden), raw[3 * e + 1].View(0, inter, 0, hidden),
                raw[3 * e + 2].View(0, hidden, 0, inter)};
    packed.push_back(Repack(block[e].w1));
    packed.push_back(Repack(block[e].w3));
    packed.push_back(Repack(block[e].w2));
  }
  for (size_t e = 0; e < experts; ++e)
    panel[e] = {packed[3 * e].view, packed[3 * e + 1].view, packed[3 * e + 2].view};
  const Isa isa = GetParam();
  // m = 10, skewed: every token's first expert is 0 (10 rows: its GEMM sets the grouped x's
  // layout), the second 1 for 3 tokens and 2 for 7, so that experts of few rows get the GEMM's
  // packed x.
  for (size_t m : {1, 5, 16, 10}) {
    const bool skewed = m == 10;
    std::vector<int32_t> idx(m * top_k);
    std::vector<float> wt(m * top_k, 0.5f);
    for (size_t t = 0; t < m; ++t) {
      idx[t * top_k] = static_cast<int32_t>(skewed ? 0 : t % experts);
      idx[t * top_k + 1] = static_cast<int32_t>(skewed ? (t < 3 ? 1 : 2) : (t + 1) % experts);
    }
    const std::vector<float> x = RandomF32(m * hidden, rng);
    std::vector<float> out(m * hidden), ref(m * hidden);
    MoeExperts(x.data(), hidden, m, idx.data(), wt.data(), top_k, panel, out.data(), hidden, ctx);
    MoeExpertsReference(x.data(), hidden, m, idx.data(), wt.data(), top_k, block, ref.data(),
                        hidden);
    // The SiLU product is rounded to bf16 before w2 on both sides; sums in another order can flip
    // one such rounding (2^-8 of that activation), which w2 carries into every output: the
    // tolerance is 2^-7 of the output's scale (as quant_test's MoE check), far below a wrong
    // weight, scale or expert.
    double scale = 0;
    for (float v : ref) scale = std::max(scale, double{std::fabs(v)});
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], ref[i], scale / 128 + 1e-30) << IsaName(isa) << " m " << m << " i " << i;
  }
}

}  // namespace
}  // namespace moeserve::kernels
