// bf16 weights repacked in 16-row panels (bf16_panels.h): the repack keeps every element, and
// MatMul / MoeExperts on the panels match the references on the dense originals on every ISA,
// for odd shapes, strided TP views, accumulate, and row ranges that do not start on a panel.
#include "kernels/bf16_panels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/internal.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "kernels/moe.h"
#include "test_util.h"

namespace moeserve::kernels {
namespace {

using testing::ExpectTokensTogetherEqualAlone;
using testing::RandomBf16;
using testing::RandomF32;
using testing::SumTolerance;

MOESERVE_EVERY_ISA_SUITE(Bf16PanelsEveryIsa);

struct Panels {
  std::vector<bf16> mem;
  WeightMatrix view;
};

Panels Repack(const WeightMatrix& dense) {
  Panels p;
  p.mem.resize(Bf16PanelElems(dense.rows, dense.cols));
  std::memset(p.mem.data(), 0xff, p.mem.size() * sizeof(bf16));  // padding must be written
  p.view = RepackBf16Panels(dense, p.mem.data());
  return p;
}

// Σ|x_bf16 · w| per output, for the tolerance of a reordered f32 sum.
double AbsSum(const float* x, const WeightMatrix& dense, size_t r) {
  double s = 0;
  const auto* w = static_cast<const bf16*>(dense.data) + r * dense.row_stride;
  for (size_t c = 0; c < dense.cols; ++c)
    s += std::fabs(static_cast<double>(RoundToBf16(x[c])) * Bf16ToF32(w[c]));
  return s;
}

TEST(Bf16Panels, RepackKeepsEveryElementOfStridedViewsAndZeroPads) {
  std::mt19937 rng(1);
  for (size_t rows : {1, 7, 16, 17, 33}) {
    for (size_t cols : {1, 5, 64, 71}) {
      const size_t stride = cols + 3;
      const std::vector<bf16> src = RandomBf16((rows + 2) * stride, rng);
      // A view starting at row 2, column 3 of a wider tensor (a TP slice).
      WeightMatrix dense = Bf16Matrix(src.data() + 2 * stride + 3, rows, cols - (cols > 3 ? 3 : 0));
      dense.row_stride = stride;
      const Panels p = Repack(dense);
      ASSERT_EQ(p.view.format, WeightFormat::kBf16Panel);
      for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < dense.cols; ++c)
          ASSERT_EQ(Bf16PanelElement(p.view, r, c).bits, src[(2 + r) * stride + 3 + c].bits)
              << rows << "x" << cols << " at " << r << "," << c;
      // Padding rows of the last panel are +0.
      for (size_t r = rows; r < (rows + 15) / 16 * 16; ++r)
        for (size_t c = 0; c < dense.cols; ++c)
          ASSERT_EQ(Bf16PanelElement(p.view, r, c).bits, 0) << r << "," << c;
    }
  }
}

TEST(Bf16Panels, RowsViewSelectsWholePanels) {
  std::mt19937 rng(2);
  const std::vector<bf16> src = RandomBf16(40 * 9, rng);
  const Panels p = Repack(Bf16Matrix(src.data(), 40, 9));
  const WeightMatrix v = Bf16PanelRows(p.view, 16, 24);
  for (size_t r = 0; r < 24; ++r)
    for (size_t c = 0; c < 9; ++c)
      ASSERT_EQ(Bf16PanelElement(v, r, c).bits, src[(16 + r) * 9 + c].bits);
}

// MatMul on panels against MatMulReference on the dense original: same products (x rounded to
// bf16, exact f32 products), sums in another order.
TEST_P(Bf16PanelsEveryIsa, MatMulMatchesDenseReferenceOnOddShapes) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  const Isa isa = GetParam();
  for (size_t m : {1, 2, 5, 6, 7, 11, 13, 24, 200, 300}) {
    // 11, 13, 24: the AVX-512 kernel's 12-token register tiles, partial and whole.
    // 20 x 1101 at m = 300: x exceeds the kernels' L2 blocks, so token and column blocks (partial
    // sums through y) and an odd last column block run.
    // 20 x 4001 at m = 300: the AMX kernel's x in token blocks (each block's B tiles made again).
    // 181 and 240 rows (11 full panels and a partial one, 15 full): each thread's one-token GEMV
    // (AVX2: groups of four panels, then a pair, then one alone) takes every kind of group.
    for (auto [rows, cols] : {std::pair<size_t, size_t>{37, 70},
                              {16, 3},
                              {50, 301},
                              {20, 1101},
                              {33, 4001},
                              {181, 301},
                              {240, 70}}) {
      if (cols == 4001 && m < 200) continue;
      const std::vector<bf16> src = RandomBf16(rows * cols, rng);
      const WeightMatrix dense = Bf16Matrix(src.data(), rows, cols);
      const Panels p = Repack(dense);
      const size_t ldx = cols + 1, ldy = rows + 2;
      const std::vector<float> x = RandomF32(m * ldx, rng, -2, 2);
      for (bool accumulate : {false, true}) {
        std::vector<float> y(m * ldy, 0.25f), ref(m * ldy, 0.25f);
        MatMul(x.data(), ldx, m, p.view, y.data(), ldy, ctx, accumulate);
        MatMulReference(x.data(), ldx, m, dense, ref.data(), ldy, accumulate);
        for (size_t t = 0; t < m; ++t)
          for (size_t r = 0; r < ldy; ++r) {
            const size_t i = t * ldy + r;
            if (r >= rows) {
              ASSERT_EQ(y[i], 0.25f) << "wrote past the rows";
              continue;
            }
            const double tol = SumTolerance(cols, AbsSum(x.data() + t * ldx, dense, r) + 0.25);
            ASSERT_NEAR(y[i], ref[i], tol)
                << IsaName(isa) << " m " << m << " " << rows << "x" << cols << " acc " << accumulate
                << " t " << t << " r " << r;
          }
      }
    }
  }
}

// One thread, so that one kernel call takes every row: 1043 rows (66 panels) pass the panel
// GEMMs' L2 blocks (avx512: 64 panels, AVX2: 32 once x outgrows L2, at 300 tokens) with an odd
// last panel, and 301 columns their 256-column block.
TEST_P(Bf16PanelsEveryIsa, MatMulOverSeveralPanelBlocksMatchesDenseReference) {
  std::mt19937 rng(9);
  ThreadPool pool(1);
  KernelContext ctx(pool, isa());
  const size_t rows = 1043, cols = 301;
  const std::vector<bf16> src = RandomBf16(rows * cols, rng);
  const WeightMatrix dense = Bf16Matrix(src.data(), rows, cols);
  const Panels p = Repack(dense);
  for (size_t m : {13, 30, 300}) {
    const std::vector<float> x = RandomF32(m * cols, rng, -2, 2);
    std::vector<float> y(m * rows), ref(m * rows);
    MatMul(x.data(), cols, m, p.view, y.data(), rows, ctx);
    MatMulReference(x.data(), cols, m, dense, ref.data(), rows, false);
    for (size_t t = 0; t < m; ++t)
      for (size_t r = 0; r < rows; ++r)
        ASSERT_NEAR(y[t * rows + r], ref[t * rows + r],
                    SumTolerance(cols, AbsSum(x.data() + t * cols, dense, r)))
            << IsaName(GetParam()) << " m " << m << " t " << t << " r " << r;
  }
}

// The MoE path splits w1 | w3 rows between threads on 16-row panels; an intermediate size that
// is not a multiple of 16 makes w3's share start inside a panel. Each expert's x is packed in
// token tiles of its own (GroupedX).
TEST_P(Bf16PanelsEveryIsa, MoeExpertsMatchesDenseReference) {
  std::mt19937 rng(4);
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  const size_t hidden = 48, inter = 40, experts = 4, top_k = 2;
  std::vector<std::vector<bf16>> mem;
  std::vector<Panels> packed;
  std::vector<ExpertWeights> dense(experts), panel(experts);
  for (size_t e = 0; e < experts; ++e) {
    mem.push_back(RandomBf16(inter * hidden, rng));
    mem.push_back(RandomBf16(inter * hidden, rng));
    mem.push_back(RandomBf16(hidden * inter, rng));
  }
  for (size_t e = 0; e < experts; ++e) {
    dense[e] = {Bf16Matrix(mem[3 * e].data(), inter, hidden),
                Bf16Matrix(mem[3 * e + 1].data(), inter, hidden),
                Bf16Matrix(mem[3 * e + 2].data(), hidden, inter)};
    packed.push_back(Repack(dense[e].w1));
    packed.push_back(Repack(dense[e].w3));
    packed.push_back(Repack(dense[e].w2));
  }
  for (size_t e = 0; e < experts; ++e)
    panel[e] = {packed[3 * e].view, packed[3 * e + 1].view, packed[3 * e + 2].view};
  const Isa isa = GetParam();
  // 40 tokens: ~20 rows per expert, two token tiles of the packed layouts and a partial third.
  for (size_t m : {1, 3, 16, 40}) {
    std::vector<int32_t> idx(m * top_k);
    std::vector<float> wt(m * top_k, 0.5f);
    for (size_t t = 0; t < m; ++t)
      idx[t * top_k] = static_cast<int32_t>(t % experts),
              idx[t * top_k + 1] = static_cast<int32_t>((t + 1) % experts);
    const std::vector<float> x = RandomF32(m * hidden, rng);
    std::vector<float> out(m * hidden), ref(m * hidden);
    MoeExperts(x.data(), hidden, m, idx.data(), wt.data(), top_k, panel, out.data(), hidden, ctx);
    MoeExpertsReference(x.data(), hidden, m, idx.data(), wt.data(), top_k, dense, ref.data(),
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

// A tile's rows for the x packers' exactness tests: random values in [-3, 3) with a special bit
// pattern (NaNs, infinities, ties, subnormals, the largest finite, signed zeros) at every fifth
// column, and every fifth slot (4, 9, 14) a padding slot (null).
struct PackerRows {
  std::vector<std::vector<float>> x;
  std::vector<const float*> rows;

  PackerRows(size_t slots, size_t k, std::mt19937& rng) : x(slots), rows(slots) {
    const uint32_t specials[] = {0x7f800001u, 0xffc00123u, 0x7f800000u, 0xff800000u,
                                 0x3f808000u, 0x3f818000u, 0x00000001u, 0x007fffffu,
                                 0x80008000u, 0x7f7fffffu, 0x00000000u, 0x80000000u};
    for (size_t s = 0; s < slots; ++s) {
      x[s] = RandomF32(k, rng, -3, 3);
      for (size_t c = s % 3; c < k; c += 5) {
        const uint32_t bits = specials[(c + s) % std::size(specials)];
        std::memcpy(&x[s][c], &bits, 4);
      }
      rows[s] = s % 5 == 4 ? nullptr : x[s].data();
    }
  }

  // Slot s's pair of columns c, c + 1 as the packers must write it: F32ToBf16 of each, the
  // column past k and padding slots zero.
  uint32_t Pair(size_t s, size_t c, size_t k) const {
    if (!rows[s] || c >= k) return 0;
    uint32_t pair = F32ToBf16(x[s][c]).bits;
    if (c + 1 < k) pair |= uint32_t{F32ToBf16(x[s][c + 1]).bits} << 16;
    return pair;
  }
};

// The AVX-512 tile packer rounds each value exactly as F32ToBf16 (ties to even, NaNs kept and
// made quiet, overflow to infinity, subnormals kept) and lays out every pair, padding slot and
// odd last column as the layout says (internal.h), for k on and off its 16-pair steps.
TEST(Bf16Panels, XTilePackerRoundsExactlyAsF32ToBf16) {
  if (BestIsa() < Isa::kAvx512Bf16)
    GTEST_SKIP() << "avx512bf16 is not available on this machine (it runs " << IsaName(BestIsa())
                 << ")";
  constexpr size_t kTile = avx512bf16::kBf16PanelXTile;
  std::mt19937 rng(8);
  for (size_t k : {1, 2, 3, 31, 32, 33, 63, 64, 301}) {
    const PackerRows x(kTile, k, rng);
    const size_t pairs = (k + 1) / 2;
    std::vector<uint32_t> tile(pairs * kTile + 16, 0xdeadbeefu);
    avx512bf16::PackBf16PanelXTile(x.rows.data(), k, tile.data());
    for (size_t i = 0; i < pairs; ++i)
      for (size_t s = 0; s < kTile; ++s)
        ASSERT_EQ(tile[i * kTile + s], x.Pair(s, 2 * i, k))
            << "k " << k << " pair " << i << " slot " << s;
    for (size_t j = pairs * kTile; j < tile.size(); ++j)
      ASSERT_EQ(tile[j], 0xdeadbeefu) << "wrote past the tile, k " << k;
  }
}

// The AMX tile packer: each value rounded exactly as F32ToBf16, token t's 32 values of column
// block b at word (b · 16 + t) · 16, padding slots and columns past k zero.
TEST(Bf16Panels, AmxXTilePackerRoundsExactlyAsF32ToBf16) {
  if (MachineIsa() < Isa::kAmx)
    GTEST_SKIP() << "amx is not available on this machine (it runs " << IsaName(MachineIsa())
                 << ")";
  constexpr size_t kTile = amx::kXTileTokens;
  std::mt19937 rng(9);
  for (size_t k : {1, 2, 3, 31, 32, 33, 63, 64, 301}) {
    const PackerRows x(kTile, k, rng);
    const size_t elems = amx::XTileElems(1, k), blocks = (k + 31) / 32;
    ASSERT_EQ(elems, blocks * 16 * 16);
    std::vector<uint32_t> tile(elems + 16, 0xdeadbeefu);
    amx::PackXTile(x.rows.data(), k, tile.data());
    for (size_t b = 0; b < blocks; ++b)
      for (size_t s = 0; s < kTile; ++s)
        for (size_t j = 0; j < 16; ++j)
          ASSERT_EQ(tile[(b * kTile + s) * 16 + j], x.Pair(s, b * 32 + 2 * j, k))
              << "k " << k << " block " << b << " slot " << s << " pair " << j;
    for (size_t j = elems; j < tile.size(); ++j)
      ASSERT_EQ(tile[j], 0xdeadbeefu) << "wrote past the tile, k " << k;
  }
}

// A token's y is the same bits alone (the GEMV) or among others (any GEMM register tile, any
// batch size), so a request's logits, and so its seeded samples, do not depend on which other
// requests share its steps (bf16_panels.h: kBf16PanelSumCols). Claimed for the scalar table and
// the f32 panel kernels (avx2, avx512); the vdpbf16ps / AMX kernels (avx512bf16, amx) sum in
// another order per batch size and are not covered yet.
TEST_P(Bf16PanelsEveryIsa, TokensTogetherEqualTokensAlone) {
  const Isa isa = GetParam();
  if (isa != Isa::kScalar && isa != Isa::kAvx2 && isa != Isa::kAvx512)
    GTEST_SKIP() << IsaName(isa)
                 << ": batch invariance is claimed for the scalar, avx2 and avx512 kernels";
  std::mt19937 rng(8);
  ThreadPool pool(2);
  KernelContext ctx(pool, isa);
  for (auto [rows, cols] :
       {std::pair<size_t, size_t>{37, 1101}, {64, 600}, {20, 255}, {181, 301}, {240, 70}})
    for (size_t m : {2, 5, 7, 13, 33}) {
      const std::vector<bf16> src = RandomBf16(rows * cols, rng);
      const Panels p = Repack(Bf16Matrix(src.data(), rows, cols));
      ExpectTokensTogetherEqualAlone(
          RandomF32(m * cols, rng, -2, 2), m, p.view, ctx,
          IsaName(isa) + " " + std::to_string(rows) + "x" + std::to_string(cols));
      if (HasFatalFailure()) return;
    }
}

// x packed once for the whole call (MatMul's path on AVX-512) or by each thread from the rounded
// rows (what MoeExperts' row views get) must be the same bits: the same kernel then gives the
// same y exactly.
TEST_P(Bf16PanelsEveryIsa, XPackedOnceEqualsXPackedPerThread) {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  const Isa isa = GetParam();
  for (size_t m : {1, 2, 12, 13, 25, 300})
    for (auto [rows, cols] : {std::pair<size_t, size_t>{37, 70}, {50, 301}, {20, 1101}}) {
      const std::vector<bf16> src = RandomBf16(rows * cols, rng);
      const Panels p = Repack(Bf16Matrix(src.data(), rows, cols));
      const size_t ldx = cols + 3;
      std::vector<float> x = RandomF32(m * ldx, rng, -2, 2);
      x[0] = 1e-40f;  // a subnormal, and ties to even
      if (cols > 2) x[1] = 1.0f + 0x1p-8f, x[2] = -(1.0f + 3 * 0x1p-8f);
      std::vector<float> whole(m * rows), rows_path(m * rows);
      MatMul(x.data(), ldx, m, p.view, whole.data(), rows, ctx);
      ScratchBuffer buf;
      const PreparedX px =
          PrepareXParallel(ctx, p.view, x.data(), ldx, nullptr, m, cols, buf).Rows(0, m);
      MatMulRows(ctx, px, p.view, 0, rows, rows_path.data(), rows, false, ctx.worker(0));
      for (size_t i = 0; i < whole.size(); ++i)
        ASSERT_EQ(std::memcmp(&whole[i], &rows_path[i], 4), 0)
            << IsaName(isa) << " m " << m << " " << rows << "x" << cols << " i " << i;
    }
}

// q, k and v through MatMulSharedX are each what MatMul gives, bit for bit: panels with row
// counts off the 16-row grain (the padded virtual rows between weights), dense bf16, and a mix of
// formats (one MatMul each).
TEST_P(Bf16PanelsEveryIsa, MatMulSharedXEqualsOneMatMulEach) {
  std::mt19937 rng(6);
  ThreadPool pool(2);
  KernelContext ctx(pool, isa());
  const Isa isa = GetParam();
  const size_t cols = 301;
  const size_t row_counts[] = {37, 20, 50};
  std::vector<std::vector<bf16>> src;
  std::vector<Panels> panels;
  for (size_t r : row_counts) {
    src.push_back(RandomBf16(r * cols, rng));
    panels.push_back(Repack(Bf16Matrix(src.back().data(), r, cols)));
  }
  const WeightMatrix dense[] = {Bf16Matrix(src[0].data(), 37, cols),
                                Bf16Matrix(src[1].data(), 20, cols),
                                Bf16Matrix(src[2].data(), 50, cols)};
  const WeightMatrix* sets[][3] = {{&panels[0].view, &panels[1].view, &panels[2].view},
                                   {&dense[0], &dense[1], &dense[2]},
                                   {&panels[0].view, &dense[1], &panels[2].view}};
  for (size_t m : {1, 2, 7, 13, 64})
    for (const auto& set : sets) {
      const std::vector<float> x = RandomF32(m * cols, rng, -2, 2);
      std::vector<std::vector<float>> shared(3), each(3);
      std::vector<MatMulOutput> outs;
      for (size_t i = 0; i < 3; ++i) {
        const size_t ldy = set[i]->rows + 1;
        shared[i].assign(m * ldy, 7.0f);
        each[i].assign(m * ldy, 7.0f);
        outs.push_back({set[i], shared[i].data(), ldy});
        MatMul(x.data(), cols, m, *set[i], each[i].data(), ldy, ctx);
      }
      MatMulSharedX(x.data(), cols, m, outs, ctx);
      for (size_t i = 0; i < 3; ++i)
        for (size_t j = 0; j < each[i].size(); ++j)
          ASSERT_EQ(std::memcmp(&shared[i][j], &each[i][j], 4), 0)
              << IsaName(isa) << " m " << m << " weight " << i << " element " << j;
    }
}

}  // namespace
}  // namespace moeserve::kernels
