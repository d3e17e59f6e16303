// Quantized formats: element conversions, quantizers, and every quantized MatMul / MoeExperts
// path against "dequantize W exactly in f32, then MatMulReference's running sum".
#include "kernels/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/matmul.h"
#include "kernels/moe.h"
#include "runtime/thread_pool.h"
#include "test_util.h"

namespace moeserve::kernels {
namespace {

using testing::RandomF32;
using testing::SumTolerance;

MOESERVE_EVERY_ISA_SUITE(QuantMatMulEveryIsa);
MOESERVE_EVERY_ISA_SUITE(QuantGemvEveryIsa);
MOESERVE_EVERY_ISA_SUITE(QuantMoeEveryIsa);

TEST(QuantElements, E4M3RoundTripsEveryCodeAndMatchesSlowRounding) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(E4M3ToFloat(c)));
      continue;
    }
    EXPECT_EQ(FloatToE4M3(E4M3ToFloat(c)), c) << c;
  }
  // Every midpoint between neighbouring codes (ties), its neighbours one f32 ulp away, and random
  // values over the whole range, against the exhaustive-search F32ToF8E4M3 of core/dtype.
  std::vector<float> probes = {0.0f, -0.0f, 448.0f, 460.0f, 464.0f, 470.0f, 1e6f, -1e6f, 1e-30f};
  for (int c = 0; c < 0x7e; ++c) {
    const float mid = 0.5f * (E4M3ToFloat(c) + E4M3ToFloat(c + 1));
    for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)})
      probes.insert(probes.end(), {v, -v});
  }
  std::mt19937 rng(3);
  for (int i = 0; i < 20000; ++i)
    probes.push_back(std::ldexp(RandomF32(1, rng, -1, 1)[0], static_cast<int>(rng() % 30) - 20));
  for (float v : probes) EXPECT_EQ(FloatToE4M3(v), F32ToF8E4M3(v)) << v;
}

TEST(QuantElements, E2M1ValuesAndTiesToEven) {
  const float values[16] = {0, .5, 1, 1.5, 2, 3, 4, 6, -0.0f, -.5, -1, -1.5, -2, -3, -4, -6};
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(E2M1ToFloat(c), values[c]);
    EXPECT_EQ(std::signbit(E2M1ToFloat(c)), c >= 8);
    EXPECT_EQ(FloatToE2M1(values[c]), c);
  }
  const std::pair<float, uint8_t> cases[] = {
      {0.25f, 0}, {0.2500001f, 1}, {0.75f, 2},  {0.7499999f, 1}, {1.25f, 2}, {1.75f, 4},
      {2.5f, 4},  {2.5000002f, 5}, {3.5f, 6},   {5.0f, 6},       {5.01f, 7}, {100.0f, 7},
      {-0.1f, 8}, {-5.5f, 15},     {-1.3f, 11}, {0.6f, 1}};
  for (auto [v, c] : cases) EXPECT_EQ(FloatToE2M1(v), c) << v;
  EXPECT_EQ(E8M0ToFloat(127), 1.0f);
  EXPECT_EQ(E8M0ToFloat(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(E8M0ToFloat(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(E8M0ToFloat(255)));
}

TEST(QuantizeFp8Block, ScalesCodesAndEdgeBlocks) {
  const size_t rows = 130, cols = 200;  // 2 × 2 blocks, the edge ones partial
  std::mt19937 rng(5);
  std::vector<float> w = RandomF32(rows * cols, rng, -0.02f, 0.02f);
  for (size_t r = 0; r < 128; ++r)  // block (0, 1) all zero
    for (size_t c = 128; c < cols; ++c) w[r * cols + c] = 0;
  w[129 * cols + 199] = -3.0f;  // the amax of block (1, 1)
  std::vector<uint8_t> q(rows * cols);
  std::vector<float> s(2 * 2);
  QuantizeFp8Block(w.data(), rows, cols, q.data(), s.data());
  EXPECT_EQ(s[1], 1.0f);
  EXPECT_EQ(s[3], 3.0f / 448.0f);
  EXPECT_EQ(q[129 * cols + 199], 0xfe);  // −448
  float amax00 = 0;
  for (size_t r = 0; r < 128; ++r)
    for (size_t c = 0; c < 128; ++c) amax00 = std::max(amax00, std::fabs(w[r * cols + c]));
  EXPECT_EQ(s[0], amax00 / 448.0f);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) {
      const float scale = s[(r / 128) * 2 + c / 128];
      ASSERT_EQ(q[r * cols + c], FloatToE4M3(w[r * cols + c] / scale)) << r << "," << c;
    }
  // The round trip through a kFp8Block view loses at most half an e4m3 step (2^-4 relative) plus
  // the subnormal step (2^-10 · scale) near zero.
  WeightMatrix v{DType::kF8E4M3, q.data(), rows, cols, cols, WeightFormat::kFp8Block, s.data(), 2};
  std::vector<float> back(rows * cols);
  DequantizeToF32(v, back.data(), cols);
  for (size_t i = 0; i < rows * cols; ++i) {
    const float scale = s[(i / cols / 128) * 2 + (i % cols) / 128];
    ASSERT_LE(std::fabs(back[i] - w[i]), std::fabs(w[i]) / 16 + scale / 1024) << i;
  }
}

TEST(QuantizeMxfp4, SharedExponentRuleAndNibbleOrder) {
  const size_t rows = 2, cols = 64;
  std::vector<float> w(rows * cols, 0.0f);
  // Row 0 group 0: amax 6 → exp 0 (byte 127); values exact. Group 1: amax 7 → exp 0, 7 → 6.
  w[0] = 6.0f, w[1] = -0.5f, w[2] = 1.25f /*tie → 1*/, w[3] = 0.2f;
  w[32] = 7.0f, w[33] = -2.9f;
  // Row 1 group 0: amax 1.0 → exp −2 (byte 125): 1.0 → 4, 0.3 → 1.2 → 1.0. Group 1 all zero.
  w[64] = 1.0f, w[65] = 0.3f, w[66] = -0.0625f /* → −0.25 → tie → −0 */;
  std::vector<uint8_t> packed(rows * cols / 2), sc(rows * cols / 32);
  QuantizeMxfp4(w.data(), rows, cols, packed.data(), sc.data());
  EXPECT_EQ(sc[0], 127);
  EXPECT_EQ(sc[1], 127);
  EXPECT_EQ(sc[2], 125);
  EXPECT_EQ(sc[3], 127);                    // amax 0 → exponent 0
  EXPECT_EQ(packed[0], 0x7 | (0x9 << 4));   // 6, −0.5: element 0 low nibble, 1 high
  EXPECT_EQ(packed[1], 0x2 | (0x0 << 4));   // 1.25 → 1 (tie to even), 0.2 → 0
  EXPECT_EQ(packed[16], 0x7 | (0xd << 4));  // 7 → 6 (saturated), −2.9 → −3
  EXPECT_EQ(packed[32], 0x6 | (0x2 << 4));  // 4, 1
  EXPECT_EQ(packed[33] & 0xf, 0x8);         // −0
  // Extremes of the clamp: tiny amax clamps at −127, huge stays in range.
  std::vector<float> t(32, 0.0f);
  t[0] = std::ldexp(1.0f, -140);
  uint8_t p[16], s;
  QuantizeMxfp4(t.data(), 1, 32, p, &s);
  EXPECT_EQ(s, 0);
  t[0] = 3e38f;
  QuantizeMxfp4(t.data(), 1, 32, p, &s);
  EXPECT_EQ(s, 127 + 127 - 2);
  EXPECT_EQ(p[0] & 0xf, 7);  // 3e38 / 2^125 = 8.8 → 6 (code 7): saturation
}

// ---- kernels ---------------------------------------------------------------------------------

// A quantized weight plus an exact f32 copy of the view for the tolerance.
struct QuantWeight {
  std::vector<uint8_t> codes, scales_u8;
  std::vector<float> scales_f32;
  WeightMatrix view;
};

// Full FP8 weight [full_rows, full_cols] with random codes (every finite code, subnormals
// included) and random block scales; the view is [rows, cols] at (row0, col0).
QuantWeight MakeFp8(size_t full_rows, size_t full_cols, size_t row0, size_t col0, size_t rows,
                    size_t cols, std::mt19937& rng, uint8_t code_mask = 0xff) {
  QuantWeight q;
  q.codes.resize(full_rows * full_cols);
  for (uint8_t& c : q.codes) {
    do c = static_cast<uint8_t>(rng()) & code_mask;
    while ((c & 0x7f) == 0x7f);
  }
  const size_t sr = (full_rows + 127) / 128, sc = (full_cols + 127) / 128;
  q.scales_f32 = RandomF32(sr * sc, rng, 1e-4f, 1e-2f);
  q.view = {DType::kF8E4M3,
            q.codes.data() + row0 * full_cols + col0,
            rows,
            cols,
            full_cols,
            WeightFormat::kFp8Block,
            q.scales_f32.data(),
            sc,
            row0,
            col0};
  return q;
}

// MXFP4 weight [full_rows, full_cols] with random codes and scales in [lo, hi]; the view starts
// at (row0, col0), col0 % 32 == 0.
QuantWeight MakeMxfp4(size_t full_rows, size_t full_cols, size_t row0, size_t col0, size_t rows,
                      size_t cols, std::mt19937& rng, int lo = 118, int hi = 128,
                      uint8_t code_mask = 0xff) {
  QuantWeight q;
  q.codes.resize(full_rows * full_cols / 2);
  for (uint8_t& c : q.codes) c = static_cast<uint8_t>(rng()) & code_mask;
  q.scales_u8.resize(full_rows * full_cols / 32);
  for (uint8_t& s : q.scales_u8) s = static_cast<uint8_t>(lo + rng() % (hi - lo + 1));
  const size_t gs = full_cols / 32;
  q.view = {DType::kU8,
            q.codes.data() + row0 * full_cols / 2 + col0 / 2,
            rows,
            cols,
            full_cols / 2,
            WeightFormat::kMxfp4,
            q.scales_u8.data() + row0 * gs + col0 / 32,
            gs};
  return q;
}

// Kernel vs MatMulReference. The products x·w are exact in every path (bf16 x times a weight of
// at most 5 significant bits, or the same f32 dequantized weight); what differs is the order of
// the f32 sums and, for FP8 on AVX-512, where the block scale is applied (once per 128-column
// partial sum instead of once per weight): both are rounding errors of the size of
// SumTolerance(k, Σ|x·w|), which allows for a random walk of ~sqrt(k) roundings with a 16x margin.
void CheckMatMul(const WeightMatrix& w, size_t m, float x_scale, bool accumulate,
                 KernelContext& ctx, std::mt19937& rng) {
  const size_t ldx = w.cols + 3, ldy = w.rows + 2;
  std::vector<float> x = RandomF32(m * ldx, rng);
  for (float& v : x) v *= x_scale;
  const std::vector<float> y0 = RandomF32(m * ldy, rng);
  std::vector<float> ref = y0, dq(w.rows * w.cols);
  MatMulReference(x.data(), ldx, m, w, ref.data(), ldy, accumulate);
  DequantizeToF32(w, dq.data(), w.cols);
  const Isa isa = ctx.isa();  // the test's ISA
  std::vector<float> got = y0;
  MatMul(x.data(), ldx, m, w, got.data(), ldy, ctx, accumulate);
  for (size_t t = 0; t < m; ++t)
    for (size_t n = 0; n < ldy; ++n) {
      const size_t i = t * ldy + n;
      if (n >= w.rows) {
        ASSERT_EQ(got[i], y0[i]);
        continue;
      }
      double abs_sum = accumulate ? std::fabs(y0[i]) : 0.0;
      for (size_t k = 0; k < w.cols; ++k)
        abs_sum += std::fabs(double{RoundToBf16(x[t * ldx + k])} * dq[n * w.cols + k]);
      ASSERT_NEAR(got[i], ref[i], SumTolerance(w.cols, abs_sum))
          << IsaName(isa) << " m=" << m << " [" << w.rows << "," << w.cols << "] at (" << w.row0
          << "," << w.col0 << ") t=" << t << " n=" << n;
    }
}

TEST_P(QuantMatMulEveryIsa, Fp8BlockViews) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(11);
  struct V {
    size_t full_rows, full_cols, row0, col0, rows, cols;
  };
  const V views[] = {
      {37, 300, 0, 0, 37, 300},       // odd shape, edge blocks
      {400, 500, 100, 70, 61, 317},   // offsets inside blocks on both axes
      {384, 300, 192, 64, 192, 236},  // a tp=8 style slice: 192 rows from row 192, col0 64
      {200, 131, 3, 1, 150, 129},     // odd col0 (GEMM falls back to GEMV), blocks straddled
      {300, 700, 100, 96, 77, 581},   // col0 % 128 = 96: a one-step first block on the AMX tiles,
                                      // and 32-row panels across the 128-row scale boundary
  };
  for (const V& v : views) {
    QuantWeight q = MakeFp8(v.full_rows, v.full_cols, v.row0, v.col0, v.rows, v.cols, rng);
    for (size_t m : {1, 3, 17, 40, 64}) CheckMatMul(q.view, m, 1.0f, m == 3 || m == 40, ctx, rng);
  }
  // Subnormal codes only (exponent field 0: ±m · 2^-9), which the AVX-512 decoder special-cases;
  // among random codes they are too small to be noticed by the tolerance.
  QuantWeight sub = MakeFp8(70, 300, 0, 0, 70, 300, rng, 0x87);
  for (size_t m : {1, 3, 17}) CheckMatMul(sub.view, m, 1.0f, false, ctx, rng);
}

TEST_P(QuantMatMulEveryIsa, Mxfp4Views) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(12);
  struct V {
    size_t full_rows, full_cols, row0, col0, rows, cols;
  };
  const V views[] = {
      {37, 32, 0, 0, 37, 32},
      {45, 96, 0, 0, 45, 96},
      {70, 1568, 5, 0, 61, 1568},
      {50, 256, 7, 64, 33, 160},  // a column slice starting at group 2
  };
  for (const V& v : views) {
    QuantWeight q = MakeMxfp4(v.full_rows, v.full_cols, v.row0, v.col0, v.rows, v.cols, rng);
    for (size_t m : {1, 3, 17, 64}) CheckMatMul(q.view, m, 1.0f, m == 17, ctx, rng);
  }
}

// e8m0 scales outside [2, 252] do not fold into bf16 exponents; those groups take the exact slow
// path. x is scaled so that every product stays a normal f32.
TEST_P(QuantMatMulEveryIsa, Mxfp4ExtremeScales) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(13);
  QuantWeight low = MakeMxfp4(40, 192, 0, 0, 40, 192, rng, 0, 3);
  for (size_t m : {1, 3, 17}) CheckMatMul(low.view, m, std::ldexp(1.0f, 100), false, ctx, rng);
  // Scales up to 2^126 (253); magnitudes limited to 0 .. 1.5 (nibble bit 2 clear) so that every
  // weight is a finite f32 (4 · 2^126 would overflow).
  QuantWeight high = MakeMxfp4(40, 192, 0, 0, 40, 192, rng, 250, 253, 0xbb);
  for (size_t m : {1, 3, 17}) CheckMatMul(high.view, m, std::ldexp(1.0f, -110), false, ctx, rng);
}

// The decode-bound GEMV path (m < 8): every token count, views whose col0 is a multiple of 64 (the
// 64-code steps) but not of 128 (a first block cut short), k not a multiple of 64 (a masked last
// step), and k beyond the permuted-x panel of 7 tokens (2304 columns), so that y is accumulated
// over two panels.
TEST_P(QuantGemvEveryIsa, Fp8EveryTokenCountBlockCutsAndPanels) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(21);
  struct V {
    size_t full_rows, full_cols, row0, col0, rows, cols;
  };
  const V views[] = {
      {20, 300, 0, 64, 20, 236},       // first block 64 wide, last step 44 codes
      {140, 2600, 3, 128, 133, 2472},  // two panels for m >= 7 (and row blocks straddled)
      {9, 2600, 0, 192, 9, 2305},      // two panels, the second 1 column wide
  };
  for (const V& v : views) {
    QuantWeight q = MakeFp8(v.full_rows, v.full_cols, v.row0, v.col0, v.rows, v.cols, rng);
    for (size_t m = 1; m <= 7; ++m) CheckMatMul(q.view, m, 1.0f, m % 2 == 0, ctx, rng);
  }
  // Subnormal and zero codes only, and mixed with normal ones: the decoder patches vectors that
  // contain any.
  for (uint8_t mask : {uint8_t{0x87}, uint8_t{0x8f}}) {
    QuantWeight sub = MakeFp8(30, 400, 0, 64, 30, 336, rng, mask);
    for (size_t m = 1; m <= 7; ++m) CheckMatMul(sub.view, m, 1.0f, false, ctx, rng);
  }
}

TEST_P(QuantGemvEveryIsa, Mxfp4EveryTokenCountAndPanels) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(22);
  // 2560 columns: two panels for m >= 7; 96 and 160: a last step of 3 and 1 groups.
  const size_t shapes[][2] = {{21, 96}, {19, 160}, {11, 2560}};
  for (const auto& sh : shapes) {
    QuantWeight q = MakeMxfp4(sh[0], sh[1], 0, 0, sh[0], sh[1], rng);
    for (size_t m = 1; m <= 7; ++m) CheckMatMul(q.view, m, 1.0f, m % 3 == 0, ctx, rng);
  }
  // A group with scale 0 or 1 in some rows only (those rows take the unfolded path, the others
  // not; the other end, 253 and 254, is covered by QuantMatMulEveryIsa.Mxfp4ExtremeScales).
  QuantWeight mixed = MakeMxfp4(24, 256, 0, 0, 24, 256, rng);
  for (size_t r = 0; r < 24; r += 5) mixed.scales_u8[r * 8 + r % 8] = r % 2 ? 1 : 0;
  for (size_t m : {1, 2, 5}) CheckMatMul(mixed.view, m, 1.0f, false, ctx, rng);
}

// e8m0 255 is NaN: a row with such a group gives NaN (as the reference), the others stay exact.
TEST_P(QuantGemvEveryIsa, Mxfp4NanScale) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(23);
  const size_t rows = 10, cols = 192;
  QuantWeight q = MakeMxfp4(rows, cols, 0, 0, rows, cols, rng);
  q.scales_u8[3 * 6 + 4] = 255;
  std::vector<float> x = RandomF32(3 * cols, rng), ref(3 * rows), dq(rows * cols);
  MatMulReference(x.data(), cols, 3, q.view, ref.data(), rows, false);
  DequantizeToF32(q.view, dq.data(), cols);
  const Isa isa = GetParam();
  for (size_t m : {1, 3}) {
    std::vector<float> got(m * rows);
    MatMul(x.data(), cols, m, q.view, got.data(), rows, ctx);
    for (size_t t = 0; t < m; ++t)
      for (size_t n = 0; n < rows; ++n) {
        const size_t i = t * rows + n;
        ASSERT_EQ(std::isnan(got[i]), n == 3) << IsaName(isa) << " t=" << t << " n=" << n;
        if (n == 3) continue;
        double abs_sum = 0;
        for (size_t k = 0; k < cols; ++k)
          abs_sum += std::fabs(double{RoundToBf16(x[t * cols + k])} * dq[n * cols + k]);
        ASSERT_NEAR(got[i], ref[i], SumTolerance(cols, abs_sum)) << IsaName(isa);
      }
  }
}

TEST_P(QuantMoeEveryIsa, Fp8AndMxfp4ExpertsMatchReference) {
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  std::mt19937 rng(14);
  const size_t hidden = 96, inter = 64, num_experts = 5, k = 2;
  for (WeightFormat fmt : {WeightFormat::kFp8Block, WeightFormat::kMxfp4}) {
    std::vector<QuantWeight> store;
    std::vector<ExpertWeights> experts(num_experts);
    for (size_t e = 0; e < num_experts; ++e) {
      auto make = [&](size_t rows, size_t cols) {
        store.push_back(fmt == WeightFormat::kFp8Block
                            ? MakeFp8(rows + 5, cols + 7, 5, 7, rows, cols, rng)
                            : MakeMxfp4(rows, cols, 0, 0, rows, cols, rng));
        return store.back().view;
      };
      store.reserve(3 * num_experts);
      experts[e] = {make(inter, hidden), make(inter, hidden), make(hidden, inter)};
    }
    experts[3] = {};  // not on this rank
    for (size_t tokens : {1, 3, 17}) {
      std::vector<float> x = RandomF32(tokens * hidden, rng);
      std::vector<int32_t> idx(tokens * k);
      std::vector<float> wts = RandomF32(tokens * k, rng, 0.1f, 1.0f);
      for (size_t i = 0; i < tokens; ++i) {
        idx[i * k] = static_cast<int32_t>(rng() % num_experts);
        idx[i * k + 1] =
            static_cast<int32_t>((idx[i * k] + 1 + rng() % (num_experts - 1)) % num_experts);
      }
      std::vector<float> ref(tokens * hidden);
      MoeExpertsReference(x.data(), hidden, tokens, idx.data(), wts.data(), k, experts, ref.data(),
                          hidden);
      double scale = 0;
      for (float v : ref) scale = std::max(scale, double{std::fabs(v)});
      const Isa isa = GetParam();
      std::vector<float> got(tokens * hidden);
      MoeExperts(x.data(), hidden, tokens, idx.data(), wts.data(), k, experts, got.data(), hidden,
                 ctx);
      // The activation is recomputed from slightly different gate/up sums and rounded to bf16
      // before w2, so one bf16 rounding flip (2^-8 relative) of an activation can propagate:
      // tolerance 2^-7 of the output's scale.
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], ref[i], scale / 128 + 1e-30)
            << IsaName(isa) << " tokens=" << tokens << " i=" << i;
    }
  }
}

}  // namespace
}  // namespace moeserve::kernels
