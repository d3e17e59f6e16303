// MXFP4 repacked for int8 dot products (mxfp4_i8.h): Q8 activation quantization, the 8-row-group
// repack, and the int8 matmul, every ISA path bit for bit against the scalar references; plus
// checks against plain f32 math that a bug shared by the reference and the kernels would fail.
#include "kernels/mxfp4_i8.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/internal.h"
#include "kernels/matmul.h"
#include "kernels/moe.h"
#include "kernels/quant.h"
#include "kernels/scratch.h"
#include "runtime/cpu_features.h"
#include "runtime/thread_pool.h"
#include "test_util.h"

namespace moeserve::kernels {
namespace {

using testing::RandomF32;

MOESERVE_EVERY_ISA_SUITE(Mxfp4I8MatMulEveryIsa);

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Bit-identical, or both NaN (NaN payloads are not part of the contract).
::testing::AssertionResult Same(float a, float b) {
  if ((std::isnan(a) && std::isnan(b)) || Bits(a) == Bits(b)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << a << " vs " << b << " (bits " << std::hex << Bits(a) << " vs " << Bits(b) << ")";
}

bool HasAvx2() {
  return BestIsa() >= Isa::kAvx2;
}

// Q8 activations with strides larger than the row (ldq = k + 32, ldd = k / 32 + 1).
struct Q8 {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> sum;
  Q8Rows rows;
};

Q8 QuantizeReference(const float* x, size_t ldx, size_t m, size_t k) {
  Q8 out;
  const size_t ldq = k + 32, ldd = k / 32 + 1;
  out.q.assign(m * ldq, 0);
  out.d.assign(m * ldd, 0);
  out.sum.assign(m * ldd, 0);
  for (size_t t = 0; t < m; ++t)
    QuantizeRowQ8Reference(x + t * ldx, k, out.q.data() + t * ldq, out.d.data() + t * ldd,
                           out.sum.data() + t * ldd);
  out.rows = {out.q.data(), out.d.data(), out.sum.data(), ldq, ldd, m, k};
  return out;
}

// An MXFP4 matrix stored in a wider one: the view's rows start `col0` (multiple of 32) columns in,
// so row_stride and scale_stride exceed cols / 2 and cols / 32.
struct Mxfp4 {
  std::vector<uint8_t> codes, scales;
  WeightMatrix view;
};

// Random codes (all 16 equally likely) and scales: mostly 118..134, some of `special`.
Mxfp4 RandomMxfp4(size_t rows, size_t cols, size_t col0, size_t full_cols, std::mt19937& rng,
                  const std::vector<uint8_t>& special = {}) {
  Mxfp4 w;
  w.codes.resize(rows * full_cols / 2);
  w.scales.resize(rows * full_cols / 32);
  for (uint8_t& c : w.codes) c = static_cast<uint8_t>(rng());
  for (uint8_t& s : w.scales)
    s = !special.empty() && rng() % 4 == 0 ? special[rng() % special.size()]
                                           : static_cast<uint8_t>(118 + rng() % 17);
  w.view = {DType::kU8,           w.codes.data() + col0 / 2,   rows,           cols, full_cols / 2,
            WeightFormat::kMxfp4, w.scales.data() + col0 / 32, full_cols / 32, 0,    0};
  return w;
}

struct Repacked {
  std::vector<uint8_t> codes, scales;
  WeightMatrix view;
};

Repacked Repack(const WeightMatrix& src) {
  Repacked r;
  r.codes.assign(Mxfp4I8CodeBytes(src.rows, src.cols), 0xaa);  // garbage the repack overwrites
  r.scales.assign(Mxfp4I8ScaleBytes(src.rows, src.cols), 0xaa);
  r.view = RepackMxfp4I8(src, r.codes.data(), r.scales.data());
  return r;
}

// `experts` random MXFP4 experts (w1, w3 [inter, hidden], w2 [hidden, inter], drawn in that order
// per expert), repacked; weights views into `packed`.
struct RepackedExperts {
  std::vector<Repacked> packed;
  std::vector<ExpertWeights> weights;
};

RepackedExperts RandomRepackedExperts(size_t experts, size_t hidden, size_t inter,
                                      std::mt19937& rng) {
  std::vector<Mxfp4> raw;
  for (size_t e = 0; e < experts; ++e) {
    raw.push_back(RandomMxfp4(inter, hidden, 0, hidden, rng));
    raw.push_back(RandomMxfp4(inter, hidden, 0, hidden, rng));
    raw.push_back(RandomMxfp4(hidden, inter, 0, inter, rng));
  }
  RepackedExperts out;
  for (const Mxfp4& r : raw) out.packed.push_back(Repack(r.view));
  for (size_t e = 0; e < experts; ++e)
    out.weights.push_back(
        {out.packed[3 * e].view, out.packed[3 * e + 1].view, out.packed[3 * e + 2].view});
  return out;
}

void SetCode(Mxfp4& w, size_t r, size_t c, uint8_t code) {
  uint8_t& byte =
      const_cast<uint8_t*>(static_cast<const uint8_t*>(w.view.data))[r * w.view.row_stride + c / 2];
  byte = c % 2 ? static_cast<uint8_t>((byte & 0x0f) | (code << 4))
               : static_cast<uint8_t>((byte & 0xf0) | code);
}

// ---- Q8 quantization ------------------------------------------------------------------------

TEST(Mxfp4I8Q8, ReferenceHandComputed) {
  // Block 0: amax 127 → d = 1, so q = round_half_even(x). Block 1: zeros. Block 2: amax 254 →
  // d = 2: 3 → 1.5 → 2, 5 → 2.5 → 2, −7 → −3.5 → −4.
  std::vector<float> x(96, 0.0f);
  const float b0[] = {127, -127, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 3.49f, -0.0f, 126.7f};
  std::copy(std::begin(b0), std::end(b0), x.begin());
  x[64] = 254;
  x[65] = 3;
  x[66] = 5;
  x[67] = -7;
  std::vector<int8_t> q(96, 99);
  std::vector<float> d(3, -1);
  std::vector<int32_t> sum(3, -1);
  QuantizeRowQ8Reference(x.data(), 96, q.data(), d.data(), sum.data());
  const int8_t want0[] = {127, -127, 0, 2, 2, 0, -2, 3, 0, 127};
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(q[i], want0[i]) << i;
  for (size_t i = 10; i < 64; ++i) EXPECT_EQ(q[i], 0) << i;
  EXPECT_EQ(q[64], 127);
  EXPECT_EQ(q[65], 2);
  EXPECT_EQ(q[66], 2);
  EXPECT_EQ(q[67], -4);
  EXPECT_EQ(d[0], 1.0f);
  EXPECT_EQ(d[1], 0.0f);
  EXPECT_EQ(d[2], 2.0f);
  EXPECT_EQ(sum[0], 127 - 127 + 2 + 2 - 2 + 3 + 127);
  EXPECT_EQ(sum[1], 0);
  EXPECT_EQ(sum[2], 127 + 2 + 2 - 4);
}

TEST(Mxfp4I8Q8, Avx2MatchesReferenceBitForBit) {
  if (!HasAvx2()) GTEST_SKIP() << "no AVX2";
  const size_t m = 6, k = 384, ldx = k + 8;
  std::mt19937 rng(11);
  std::vector<float> x = RandomF32(m * ldx, rng, -3, 3);
  float* r0 = x.data();
  std::fill(r0, r0 + 32, 0.0f);        // all-zero block
  std::fill(r0 + 32, r0 + 64, -0.0f);  // all negative zero
  r0[64 + 5] = 1e30f;                  // one huge outlier
  for (size_t i = 0; i < 32; ++i) r0[96 + i] = (static_cast<float>(i) - 15.5f);  // ties at d = 1
  r0[96] = 127.0f;
  for (size_t i = 0; i < 32; ++i) r0[128 + i] = 2.0f * (static_cast<float>(i) - 16) + 1;  // d = 2
  r0[128] = 254.0f;
  r0[160 + 3] = -0.0f;
  for (size_t i = 0; i < 32; ++i) r0[192 + i] = 1e-44f * static_cast<float>(i % 3);  // d → 0
  for (size_t i = 0; i < 32; ++i) r0[224 + i] = 3e-39f * static_cast<float>(i) - 4e-38f;
  float* r1 = x.data() + ldx;  // a row of powers of two and their neighbours
  for (size_t i = 0; i < k; ++i) r1[i] = std::ldexp(1.0f + (i % 5) * 0.125f, int(i % 40) - 20);
  const Q8 ref = QuantizeReference(x.data(), ldx, m, k);
  Q8 got = ref;
  std::fill(got.q.begin(), got.q.end(), 0);
  std::fill(got.d.begin(), got.d.end(), 0.0f);
  std::fill(got.sum.begin(), got.sum.end(), 0);
  avx2::QuantizeRowsQ8(x.data(), ldx, m, k, got.q.data(), ref.rows.ldq, got.d.data(),
                       got.sum.data(), ref.rows.ldd);
  EXPECT_EQ(got.q, ref.q);
  EXPECT_EQ(got.sum, ref.sum);
  for (size_t i = 0; i < ref.d.size(); ++i) EXPECT_TRUE(Same(got.d[i], ref.d[i])) << i;
  EXPECT_EQ(ref.q[96], 127);  // the ties went to even
  EXPECT_EQ(ref.q[97], -14);  // −14.5
  EXPECT_EQ(ref.q[98], -14);  // −13.5
  EXPECT_EQ(ref.sum[6], 0);   // the underflowing block is zeros
}

// ---- repack ---------------------------------------------------------------------------------

void ExpectElementsMatch(const WeightMatrix& src, const WeightMatrix& packed) {
  std::vector<float> row(src.cols);
  for (size_t r = 0; r < src.rows; ++r) {
    DequantizeRow(src, r, 0, src.cols, row.data());
    for (size_t c = 0; c < src.cols; ++c)
      ASSERT_TRUE(Same(Mxfp4I8Element(packed, r, c), row[c])) << "r " << r << " c " << c;
  }
}

TEST(Mxfp4I8Repack, ElementsMatchSourceOnOddRowsAndStridedViews) {
  std::mt19937 rng(21);
  for (size_t rows : {1, 7, 9, 13, 33})
    for (size_t col0 : {0, 64}) {
      SCOPED_TRACE(::testing::Message() << "rows " << rows << " col0 " << col0);
      const size_t cols = 96, full = col0 ? 224 : cols;
      const Mxfp4 src = RandomMxfp4(rows, cols, col0, full, rng, {0, 1, 254, 255});
      const Repacked p = Repack(src.view);
      EXPECT_EQ(p.view.format, WeightFormat::kMxfp4I8);
      EXPECT_EQ(p.view.row_stride, cols / 32 * 128);
      EXPECT_EQ(p.view.scale_stride, cols / 32 * 8);
      EXPECT_EQ(p.codes.size() + p.scales.size(), (rows + 7) / 8 * 8 * (cols / 2 + cols / 32));
      ExpectElementsMatch(src.view, p.view);
      // Padding rows of the last group: +0 codes and scale 127.
      const size_t groups = (rows + 7) / 8;
      for (size_t r = rows; r < groups * 8; ++r)
        for (size_t c = 0; c < cols; ++c) {
          WeightMatrix whole = p.view;
          whole.rows = groups * 8;
          ASSERT_TRUE(Same(Mxfp4I8Element(whole, r, c), 0.0f));
          ASSERT_EQ(p.scales[(groups - 1) * p.view.scale_stride + c / 32 * 8 + r % 8], 127);
        }
      if (rows > 8) {  // a sub-view starting at row group 1
        WeightMatrix sub_src = src.view;
        sub_src.data = static_cast<const uint8_t*>(src.view.data) + 8 * src.view.row_stride;
        sub_src.scales = static_cast<const uint8_t*>(src.view.scales) + 8 * src.view.scale_stride;
        sub_src.rows = rows - 8;
        ExpectElementsMatch(sub_src, Mxfp4I8Rows(p.view, 8, rows - 8));
      }
    }
}

// ---- matmul ---------------------------------------------------------------------------------

// x [m, k] (ldx = k + 5): uniform, with an all-zero block and an outlier block.
std::vector<float> RandomX(size_t m, size_t k, std::mt19937& rng) {
  std::vector<float> x = RandomF32(m * (k + 5), rng, -2, 2);
  std::fill(x.begin(), x.begin() + 32, 0.0f);
  if (k >= 64) x[32 + rng() % 32] = 1e6f;
  return x;
}

using Mxfp4I8Kernel = void (*)(const Q8Rows&, const WeightMatrix&, float*, size_t, bool);

void ExpectKernelMatchesReference(Mxfp4I8Kernel kernel, const Q8Rows& q, const WeightMatrix& w,
                                  std::mt19937& rng) {
  const size_t ldy = w.rows + 3;
  for (bool accumulate : {false, true}) {
    const std::vector<float> y0 = RandomF32(q.m * ldy, rng);
    std::vector<float> ref = y0, got = y0;
    MatMulMxfp4I8Reference(q, w, ref.data(), ldy, accumulate);
    kernel(q, w, got.data(), ldy, accumulate);
    for (size_t t = 0; t < q.m; ++t)
      for (size_t i = 0; i < ldy; ++i)
        ASSERT_TRUE(Same(got[t * ldy + i], ref[t * ldy + i]))
            << "t " << t << " col " << i << " accumulate " << accumulate;
  }
}

// The SIMD kernels this machine can run (AVX2, AVX-512 VNNI).
std::vector<Mxfp4I8Kernel> AvailableKernels() {
  std::vector<Mxfp4I8Kernel> out;
  if (HasAvx2()) out.push_back(avx2::MatMulMxfp4I8);
  if (BestIsa() >= Isa::kAvx512) out.push_back(avx512::MatMulMxfp4I8);
  return out;
}

// Odd row counts (partial groups, an odd number of groups), sub-views starting on group 1, and
// every token count the kernels tile differently (AVX2: tiles of 4 and a 1-3 tail; AVX-512: one
// pass of each size up to 16, then passes of nearly equal size).
void ExpectKernelMatchesReferenceOnOddShapes(Mxfp4I8Kernel kernel, std::mt19937& rng) {
  for (size_t k : {32, 64, 96, 3072})
    for (size_t rows : {8, 13, 24, 40, 77}) {  // 40, 77: decode's 32-row passes and a tail
      const Mxfp4 src = RandomMxfp4(rows, k, 0, k, rng, {0, 1, 126, 127, 128, 254});
      const Repacked p = Repack(src.view);
      for (size_t m : {1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 31, 33}) {
        SCOPED_TRACE(::testing::Message() << "m " << m << " rows " << rows << " k " << k);
        const std::vector<float> x = RandomX(m, k, rng);
        const Q8 q = QuantizeReference(x.data(), k + 5, m, k);
        ExpectKernelMatchesReference(kernel, q.rows, p.view, rng);
        if (rows > 8)
          ExpectKernelMatchesReference(kernel, q.rows, Mxfp4I8Rows(p.view, 8, rows - 8), rng);
      }
    }
}

TEST(Mxfp4I8MatMul, Avx2EqualsReferenceBitForBit) {
  if (!HasAvx2()) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(31);
  ExpectKernelMatchesReferenceOnOddShapes(avx2::MatMulMxfp4I8, rng);
}

TEST(Mxfp4I8MatMul, Avx512VnniEqualsReferenceBitForBit) {
  if (BestIsa() < Isa::kAvx512)
    GTEST_SKIP() << "avx512 (with VNNI) is not available on this machine (it runs "
                 << IsaName(BestIsa()) << ")";
  std::mt19937 rng(31);
  ExpectKernelMatchesReferenceOnOddShapes(avx512::MatMulMxfp4I8, rng);
}

// The tile kernel at every m (the amx table takes it from 8 tokens; below, the VNNI kernel).
void AmxMxfp4I8(const Q8Rows& x, const WeightMatrix& w, float* y, size_t ldy, bool accumulate) {
  static WorkerScratch scratch;
  amx::MatMulMxfp4I8(x, w, y, ldy, accumulate, scratch);
}

TEST(Mxfp4I8MatMul, AmxInt8EqualsReferenceBitForBit) {
  if (BestIsa() < Isa::kAmx)
    GTEST_SKIP() << "amx is not available on this machine (it runs " << IsaName(BestIsa()) << ")";
  std::mt19937 rng(31);
  ExpectKernelMatchesReferenceOnOddShapes(AmxMxfp4I8, rng);
}

TEST(Mxfp4I8MatMul, SubViewEqualsRowsOfWholeMatrix) {
  std::mt19937 rng(32);
  const size_t rows = 40, k = 96, m = 5;
  const Repacked p = Repack(RandomMxfp4(rows, k, 0, k, rng).view);
  const std::vector<float> x = RandomX(m, k, rng);
  const Q8 q = QuantizeReference(x.data(), k + 5, m, k);
  std::vector<float> whole(m * rows), part(m * 13);
  MatMulMxfp4I8Reference(q.rows, p.view, whole.data(), rows, false);
  MatMulMxfp4I8Reference(q.rows, Mxfp4I8Rows(p.view, 8, 13), part.data(), 13, false);
  for (size_t t = 0; t < m; ++t)
    for (size_t r = 0; r < 13; ++r) EXPECT_TRUE(Same(part[t * 13 + r], whole[t * rows + 8 + r]));
}

TEST(Mxfp4I8MatMul, NanScaleMakesExactlyItsRowNan) {
  std::mt19937 rng(33);
  const size_t rows = 45, k = 128, m = 6;  // row 11 in a 32-row decode pass (m = 1 below)
  Mxfp4 src = RandomMxfp4(rows, k, 0, k, rng, {0, 1, 254});
  src.scales[11 * (k / 32) + 2] = 255;  // row 11, block 2
  const Repacked p = Repack(src.view);
  const std::vector<float> x = RandomF32(m * k, rng);
  const Q8 q = QuantizeReference(x.data(), k, m, k);
  std::vector<float> ref(m * rows);
  MatMulMxfp4I8Reference(q.rows, p.view, ref.data(), rows, false);
  for (size_t t = 0; t < m; ++t)
    for (size_t r = 0; r < rows; ++r) EXPECT_EQ(std::isnan(ref[t * rows + r]), r == 11) << t << r;
  Q8Rows one = q.rows;
  one.m = 1;
  for (Mxfp4I8Kernel kernel : AvailableKernels()) {
    ExpectKernelMatchesReference(kernel, q.rows, p.view, rng);
    ExpectKernelMatchesReference(kernel, one, p.view, rng);
  }
}

// y of every available path (the reference always; the SIMD kernels the CPU has).
std::vector<std::vector<float>> AllPaths(const Q8Rows& q, const WeightMatrix& w) {
  std::vector<std::vector<float>> out(1, std::vector<float>(q.m * w.rows));
  MatMulMxfp4I8Reference(q, w, out[0].data(), w.rows, false);
  for (Mxfp4I8Kernel kernel : AvailableKernels()) {
    out.emplace_back(q.m * w.rows);
    kernel(q, w, out.back().data(), w.rows, false);
  }
  return out;
}

// The int16 bound: every code ±6 (u = 24 or 0) against every q = ±127 gives the largest sums
// the kernels add before widening, and |S| = 32 · 12 · 127.
TEST(Mxfp4I8MatMul, ExtremeCodesAndActivationsAreExact) {
  const size_t rows = 16, k = 64, m = 4;
  std::mt19937 rng(36);
  Mxfp4 src = RandomMxfp4(rows, k, 0, k, rng);
  for (size_t r = 0; r < rows; ++r) {
    const uint8_t code = r % 2 ? 0xff : 0x77;  // −6 or +6 in both nibbles
    std::fill(src.codes.begin() + r * k / 2, src.codes.begin() + (r + 1) * k / 2, code);
    std::fill(src.scales.begin() + r * k / 32, src.scales.begin() + (r + 1) * k / 32, 127);
  }
  const Repacked p = Repack(src.view);
  std::vector<float> x(m * k);
  for (size_t t = 0; t < m; ++t)
    std::fill(x.begin() + t * k, x.begin() + (t + 1) * k, t % 2 ? -127.0f : 127.0f);
  const Q8 q = QuantizeReference(x.data(), k, m, k);
  for (const std::vector<float>& y : AllPaths(q.rows, p.view))
    for (size_t t = 0; t < m; ++t)
      for (size_t r = 0; r < rows; ++r) {
        const float sign = (t % 2 ? -1.0f : 1.0f) * (r % 2 ? -1.0f : 1.0f);
        EXPECT_EQ(y[t * rows + r], sign * 2 * 32 * 12 * 127 * 0.5f) << t << " " << r;
      }
  for (Mxfp4I8Kernel kernel : AvailableKernels())
    ExpectKernelMatchesReference(kernel, q.rows, p.view, rng);
}

// Scales whose products dw · 0.5d leave the normal range (so a kernel that forms them by adding
// exponents must not), next to ones just inside it: activation blocks of magnitude 2^±100 and
// 2^-110 / 2^127 (the half-scales 0.5d stay normal) against weight scales at both ends of e8m0,
// with zero blocks and NaN / 2^-127 scales among them. Every kernel must still equal the reference
// bit for bit.
TEST(Mxfp4I8MatMul, ScalesAtTheEdgesOfTheNormalRangeAreExact) {
  const size_t rows = 24, k = 256, blocks = k / 32;
  std::mt19937 rng(37);
  for (const std::vector<uint8_t>& special : std::vector<std::vector<uint8_t>>{
           {1, 2, 26, 27, 28, 227, 228, 229, 253, 254}, {0, 1, 127, 254, 255}}) {
    Mxfp4 src = RandomMxfp4(rows, k, 0, k, rng, special);
    const Repacked p = Repack(src.view);
    for (size_t m : {1, 3, 8, 16, 21}) {
      SCOPED_TRACE(::testing::Message() << "m " << m << " specials " << special.size());
      std::vector<float> x = RandomF32(m * k, rng, -1, 1);
      for (size_t t = 0; t < m; ++t)
        for (size_t b = 0; b < blocks; ++b) {
          static constexpr int kExponents[] = {-110, -100, -60, 0, 60, 100, 120, 127};
          const int e = kExponents[(t + 3 * b) % 8];
          for (size_t i = 0; i < 32; ++i) {
            float& v = x[t * k + b * 32 + i];
            v = (t + b) % 5 == 4 ? 0.0f : std::ldexp(v, e);
          }
        }
      const Q8 q = QuantizeReference(x.data(), k, m, k);
      for (Mxfp4I8Kernel kernel : AvailableKernels())
        ExpectKernelMatchesReference(kernel, q.rows, p.view, rng);
    }
  }
}

// Against f32 math on the un-quantized x: x's rounding to int8 moves each product by at most
// |w| · d / 2 per element (d its block's scale), and that is all the error there is besides f32
// rounding; a wrong column pairing (nibble order, chunk order, offset) misses by ~Σ|w||x|.
TEST(Mxfp4I8MatMul, CloseToF32ProductOfDequantizedWeights) {
  std::mt19937 rng(34);
  const size_t rows = 24, k = 256, m = 5;
  const Mxfp4 src = RandomMxfp4(rows, k, 0, k, rng);
  const Repacked p = Repack(src.view);
  const std::vector<float> x = RandomF32(m * k, rng, -1, 1);
  const Q8 q = QuantizeReference(x.data(), k, m, k);
  for (const std::vector<float>& y : AllPaths(q.rows, p.view))
    for (size_t t = 0; t < m; ++t)
      for (size_t r = 0; r < rows; ++r) {
        double exact = 0, abs_sum = 0, bound = 0;
        for (size_t c = 0; c < k; ++c) {
          const double wv = Mxfp4I8Element(p.view, r, c), xv = x[t * k + c];
          exact += wv * xv;
          abs_sum += std::fabs(wv * xv);
          bound += std::fabs(wv) * q.rows.d[t * q.rows.ldd + c / 32] / 2;
        }
        EXPECT_LE(bound, 4.0 / 127 * abs_sum);  // the quantization of x is fine enough to matter
        EXPECT_NEAR(y[t * rows + r], exact, 1.001 * bound + 1e-5 * abs_sum) << t << " " << r;
      }
}

// Permuting the columns inside each 32-column block of both x and W leaves every block's scale,
// sum and dot product unchanged, so y is bit-identical; changing one code of W changes only its
// row's outputs.
TEST(Mxfp4I8MatMul, ConsistentColumnPermutationKeepsYAndOneCodeChangesOneRow) {
  std::mt19937 rng(35);
  const size_t rows = 16, k = 128, m = 9;
  Mxfp4 src = RandomMxfp4(rows, k, 0, k, rng);
  const std::vector<float> x = RandomF32(m * k, rng);
  std::vector<size_t> perm(k);
  for (size_t b = 0; b < k; b += 32) {
    std::iota(perm.begin() + b, perm.begin() + b + 32, b);
    std::shuffle(perm.begin() + b, perm.begin() + b + 32, rng);
  }
  Mxfp4 psrc = src;
  psrc.view.data = psrc.codes.data();
  psrc.view.scales = psrc.scales.data();
  std::vector<float> px(m * k);
  for (size_t c = 0; c < k; ++c) {
    for (size_t r = 0; r < rows; ++r) {
      const uint8_t code = (src.codes[r * k / 2 + perm[c] / 2] >> (4 * (perm[c] % 2))) & 0xf;
      SetCode(psrc, r, c, code);
    }
    for (size_t t = 0; t < m; ++t) px[t * k + c] = x[t * k + perm[c]];
  }
  const Q8 q = QuantizeReference(x.data(), k, m, k), pq = QuantizeReference(px.data(), k, m, k);
  const auto base = AllPaths(q.rows, Repack(src.view).view);
  const auto permuted = AllPaths(pq.rows, Repack(psrc.view).view);
  for (size_t path = 0; path < base.size(); ++path)
    for (size_t i = 0; i < m * rows; ++i) EXPECT_TRUE(Same(permuted[path][i], base[path][i]));
  // Row 5, column 77: +6 → −6 (codes 7 → 15) or anything → +6.
  const size_t r0 = 5, c0 = 77;
  const uint8_t old = (src.codes[r0 * k / 2 + c0 / 2] >> (4 * (c0 % 2))) & 0xf;
  SetCode(src, r0, c0, old == 7 ? 15 : 7);
  const auto changed = AllPaths(q.rows, Repack(src.view).view);
  for (size_t path = 0; path < base.size(); ++path)
    for (size_t t = 0; t < m; ++t)
      for (size_t r = 0; r < rows; ++r) {
        const size_t i = t * rows + r;
        if (r != r0) {
          EXPECT_TRUE(Same(changed[path][i], base[path][i])) << t << " " << r;
        } else if (q.q[t * q.rows.ldq + c0] != 0) {
          EXPECT_NE(changed[path][i], base[path][i]) << t;
        }
      }
}

// The public entry points on repacked weights, on every ISA this machine runs: MatMul (threads
// split the rows on 8-row groups; decode and prefill m) equals MatMulReference bit for bit, and
// MoeExperts (x quantized once for all experts, w2's input quantized after SiLU) matches
// MoeExpertsReference.
TEST_P(Mxfp4I8MatMulEveryIsa, PublicMatMulAndMoeMatchReference) {
  std::mt19937 rng(11);
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  const size_t hidden = 96, inter = 64, experts = 5, top_k = 2;
  const Isa isa = GetParam();
  // m = 80: the amx table's tile kernel (from 32 tokens; experts get 32 each here).
  for (size_t m : {1, 3, 8, 17, 80}) {
    const Mxfp4 src = RandomMxfp4(40, hidden, 0, hidden, rng);
    const Repacked w = Repack(src.view);
    const std::vector<float> x = RandomX(m, hidden, rng);
    std::vector<float> y(m * 40), ref(m * 40);
    MatMul(x.data(), hidden + 5, m, w.view, y.data(), 40, ctx);
    MatMulReference(x.data(), hidden + 5, m, w.view, ref.data(), 40);
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_EQ(Bits(y[i]), Bits(ref[i])) << IsaName(isa) << " m " << m << " i " << i;

    const RepackedExperts ex = RandomRepackedExperts(experts, hidden, inter, rng);
    const std::vector<ExpertWeights>& ew = ex.weights;
    std::vector<int32_t> idx(m * top_k);
    std::vector<float> wt(m * top_k, 0.5f);
    for (size_t t = 0; t < m; ++t)
      idx[t * top_k] = static_cast<int32_t>(t % experts),
              idx[t * top_k + 1] = static_cast<int32_t>((t + 2) % experts);
    const std::vector<float> xm = RandomF32(m * hidden, rng);
    std::vector<float> out(m * hidden), out_ref(m * hidden);
    MoeExperts(xm.data(), hidden, m, idx.data(), wt.data(), top_k, ew, out.data(), hidden, ctx);
    MoeExpertsReference(xm.data(), hidden, m, idx.data(), wt.data(), top_k, ew, out_ref.data(),
                        hidden);
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], out_ref[i], 1e-5f * (1 + std::fabs(out_ref[i])))
          << IsaName(isa) << " m " << m << " i " << i;
  }
}

// MoeExperts on int8 x runs gate, up, SiLU and w2's quantization per thread over a share of the
// intermediate columns (32-column Q8 blocks). The result must not depend on how those columns are
// shared: 1 thread (whole rows, as the separate runs did), 2 and 3 threads (uneven shares of an
// intermediate size of 160 = 5 blocks) give the same bits, for decode and prefill-sized m.
TEST_P(Mxfp4I8MatMulEveryIsa, MoeBitsDoNotDependOnTheThreadCount) {
  std::mt19937 rng(12);
  const size_t hidden = 64, inter = 160, experts = 4, top_k = 2;
  const RepackedExperts ex = RandomRepackedExperts(experts, hidden, inter, rng);
  const std::vector<ExpertWeights>& ew = ex.weights;
  for (size_t m : {1, 5, 24, 70}) {
    std::vector<int32_t> idx(m * top_k);
    std::vector<float> wt(m * top_k);
    for (size_t t = 0; t < m; ++t) {
      idx[t * top_k] = static_cast<int32_t>(t % experts);
      idx[t * top_k + 1] = static_cast<int32_t>((3 * t + 1) % experts);
      wt[t * top_k] = 0.7f, wt[t * top_k + 1] = 0.3f;
    }
    const std::vector<float> x = RandomF32(m * hidden, rng);
    std::vector<float> first;
    for (size_t threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      KernelContext ctx(pool, isa());
      std::vector<float> out(m * hidden);
      MoeExperts(x.data(), hidden, m, idx.data(), wt.data(), top_k, ew, out.data(), hidden, ctx);
      if (first.empty()) {
        first = out;
        continue;
      }
      for (size_t i = 0; i < out.size(); ++i)
        ASSERT_EQ(Bits(out[i]), Bits(first[i]))
            << IsaName(isa()) << " m " << m << " threads " << threads << " i " << i;
    }
  }
}

}  // namespace
}  // namespace moeserve::kernels
