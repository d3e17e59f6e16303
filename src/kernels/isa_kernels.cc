// The per-ISA tables of isa_kernels.h and the row kernels they hold: each adapts one ISA's
// kernels (internal.h) to the RowsFn contract (the view of the row range, its scratch, and
// which GEMV / GEMM variant suits m). Baseline-compiled: it only calls into the ISA TUs.
#include "kernels/isa_kernels.h"

#include <algorithm>
#include <cstring>

#include "kernels/activation.h"
#include "kernels/bf16_panels.h"
#include "kernels/fp8_panels.h"
#include "kernels/matmul_internal.h"
#include "kernels/mxfp4_i8.h"
#include "kernels/quant.h"

namespace moeserve::kernels {
namespace {

// Rows [n0, n1) of a weight whose kernels start on a `group`-row boundary: run(g0, n, y, ldy,
// accumulate) computes rows [g0, g0 + n) with g0 % group == 0. A range that does not start on a
// group (MoE's w3 half when the intermediate size is not a multiple of it) computes its first
// group into scratch and keeps the rows it owns.
template <typename Run>
void RowsFromGroupStart(size_t group, size_t m, size_t rows, size_t n0, size_t n1, float* y,
                        size_t ldy, bool accumulate, ScratchBuffer& scratch, const Run& run) {
  if (n0 % group != 0) {
    const size_t g0 = n0 / group * group, g1 = std::min(g0 + group, rows), own = std::min(g1, n1);
    float* tmp = scratch.As<float>(m * group);
    run(g0, g1 - g0, tmp, group, false);
    for (size_t t = 0; t < m; ++t)
      for (size_t n = n0; n < own; ++n) {
        float& out = y[t * ldy + n];
        out = accumulate ? out + tmp[t * group + n - g0] : tmp[t * group + n - g0];
      }
    n0 = own;
    if (n0 >= n1) return;
  }
  run(n0, n1 - n0, y + n0, ldy, accumulate);
}

QuantRows QuantView(const WeightMatrix& w, size_t n0, size_t n1) {
  QuantRows q{};
  q.codes = static_cast<const uint8_t*>(w.data) + n0 * w.row_stride;
  q.row_stride = w.row_stride;
  q.scale_stride = w.scale_stride;
  q.rows = n1 - n0;
  q.k = w.cols;
  if (w.format == WeightFormat::kFp8Block) {
    q.scales = w.scales;
    q.row0 = w.row0 + n0;
    q.col0 = w.col0;
  } else {
    q.scales = static_cast<const uint8_t*>(w.scales) + n0 * w.scale_stride;
  }
  return q;
}

// ---- scalar: the reference's arithmetic, row by row ----

// Each row dequantized exactly to f32 (DequantizeRow), then the reference's running sum, so the
// scalar path equals MatMulReference bit for bit.
void ScalarRows(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                size_t ldy, bool accumulate, WorkerScratch& s) {
  float* row = s.panel.As<float>(w.cols);
  for (size_t n = n0; n < n1; ++n) {
    DequantizeRow(w, n, 0, w.cols, row);
    for (size_t t = 0; t < x.m; ++t) {
      const float* xt = x.f32 + t * x.ld;
      float sum = 0;
      for (size_t k = 0; k < w.cols; ++k) sum += xt[k] * row[k];
      float& out = y[t * ldy + n];
      out = accumulate ? out + sum : sum;
    }
  }
}

template <void (*Group)(const Q8Rows&, const WeightMatrix&, float*, size_t, bool)>
void Q8GroupRows(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                 size_t ldy, bool accumulate, WorkerScratch& s) {
  RowsFromGroupStart(kMxfp4I8GroupRows, x.m, w.rows, n0, n1, y, ldy, accumulate, s.panel,
                     [&](size_t g0, size_t n, float* yg, size_t ldyg, bool acc) {
                       Group(x.q8, Mxfp4I8Rows(w, g0, n), yg, ldyg, acc);
                     });
}

void ScalarRoundRow(const float* x, size_t k, float* out, size_t ld) {
  for (size_t j = 0; j < k; ++j) out[j] = RoundToBf16(x[j]);
  std::fill(out + k, out + ld, 0.0f);
}

// ---- AVX2 ----

// x as avx2::PackX lays it out for the AVX2 GEMMs and panel kernels: packed once for the call
// (PrepareRows, panel weights only), or here by this thread.
const float* PackedXForAvx2(const PreparedX& x, size_t k, WorkerScratch& s) {
  if (x.packed_f32) return x.packed_f32;
  float* xp = s.xpack.As<float>(avx2::PackedXFloats(x.m, k));
  avx2::PackX(x.f32, x.ld, x.m, k, xp);
  return xp;
}

void Avx2DenseF32Rows(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                      size_t ldy, bool accumulate, WorkerScratch& s) {
  const float* wn = static_cast<const float*>(w.data) + n0 * w.row_stride;
  avx2::GemvF32(x.f32, x.ld, x.m, wn, w.row_stride, w.cols, n1 - n0, y + n0, ldy, accumulate);
}

void Avx2DenseBf16Rows(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                       size_t ldy, bool accumulate, WorkerScratch& s) {
  const size_t k = w.cols, rows = n1 - n0;
  const bf16* wn = static_cast<const bf16*>(w.data) + n0 * w.row_stride;
  if (x.m < kGemmMinM)
    return avx2::GemvBf16(x.f32, x.ld, x.m, wn, w.row_stride, k, rows, y + n0, ldy, accumulate);
  float* pack = s.pack.As<float>(avx2::PackFloatsGemmBf16(k));
  const float* xp = PackedXForAvx2(x, k, s);
  avx2::GemmBf16(xp, x.m, wn, w.row_stride, k, rows, y + n0, ldy, accumulate, pack);
}

// FP8-block and MXFP4 rows dequantized exactly to f32 in cache, then the f32 kernels on the
// bf16-rounded x.
void Avx2QuantRows(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                   size_t ldy, bool accumulate, WorkerScratch& s) {
  const QuantRows q = QuantView(w, n0, n1);
  const auto decode =
      w.format == WeightFormat::kFp8Block ? avx2::DecodeFp8Row : avx2::DecodeMxfp4Row;
  const size_t k = w.cols;
  float* yn = y + n0;
  if (x.m < kGemmMinM) {
    float* row = s.panel.As<float>(k);
    for (size_t r = 0; r < q.rows; ++r) {
      decode(q, r, row);
      avx2::GemvF32(x.f32, x.ld, x.m, row, k, k, 1, yn + r, ldy, accumulate);
    }
    return;
  }
  constexpr size_t kPanelRows = 16;
  float* panel = s.panel.As<float>(kPanelRows * k);
  float* pack = s.pack.As<float>(avx2::PackFloatsGemmBf16(k));
  const float* xp = PackedXForAvx2(x, k, s);
  for (size_t r0 = 0; r0 < q.rows; r0 += kPanelRows) {
    const size_t nr = std::min(kPanelRows, q.rows - r0);
    for (size_t r = 0; r < nr; ++r) decode(q, r0 + r, panel + r * k);
    avx2::GemmF32(xp, x.m, panel, k, k, nr, yn + r0, ldy, accumulate, pack);
  }
}

// bf16 panels on x in avx2::PackX's tiles (the AVX2 kernel, and the avx512 table's f32-FMA one).
template <void (*Kernel)(const float*, size_t, const WeightMatrix&, float*, size_t, bool)>
void PackedXBf16PanelRows(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                          size_t ldy, bool accumulate, WorkerScratch& s) {
  const float* xp = PackedXForAvx2(x, w.cols, s);
  RowsFromGroupStart(kBf16PanelRows, x.m, w.rows, n0, n1, y, ldy, accumulate, s.panel,
                     [&](size_t g0, size_t n, float* yg, size_t ldyg, bool acc) {
                       Kernel(xp, x.m, Bf16PanelRows(w, g0, n), yg, ldyg, acc);
                     });
}

// The FP8 panel kernel exists for AVX2 only: on AVX-512 BF16 the vdpbf16ps FP8-block kernels
// decode rows in registers and are faster, so model::WeightLayoutFor never makes FP8 panels there.
void Avx2Fp8PanelRows(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                      size_t ldy, bool accumulate, WorkerScratch& s) {
  const float* xp = PackedXForAvx2(x, w.cols, s);
  float* pack = s.pack.As<float>(avx2::Fp8PanelPackFloats(w.cols));
  RowsFromGroupStart(kFp8PanelRows, x.m, w.rows, n0, n1, y, ldy, accumulate, s.panel,
                     [&](size_t g0, size_t n, float* yg, size_t ldyg, bool acc) {
                       avx2::MatMulFp8Panels(xp, x.m, Fp8PanelRows(w, g0, n), yg, ldyg, acc, pack);
                     });
}

void Avx2QuantizeRow(const float* x, size_t k, int8_t* q, float* d, int32_t* sum) {
  avx2::QuantizeRowsQ8(x, k, 1, k, q, k, d, sum, k / kMxfp4I8Block);
}

void Avx2RoundRow(const float* x, size_t k, float* out, size_t ld) {
  avx2::RoundRowsToBf16(x, k, 1, k, out, ld);
}

// ---- AVX-512 with VNNI, without BF16 (and the tables above it) ----
void Avx512DenseF32Rows(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                        size_t ldy, bool accumulate, WorkerScratch& s) {
  const float* wn = static_cast<const float*>(w.data) + n0 * w.row_stride;
  avx512::GemvF32(x.f32, x.ld, x.m, wn, w.row_stride, w.cols, n1 - n0, y + n0, ldy, accumulate);
}

// Rows t < m of x packed by avx2::PackX (tiles of kPackedXTile tokens, [k][kPackedXTile] each)
// back into rows of k floats.
void UnpackXRows(const float* xp, size_t m, size_t k, float* rows) {
  constexpr size_t kTile = avx2::kPackedXTile;
  for (size_t t = 0; t < m; ++t) {
    const float* tile = xp + t / kTile * kTile * k + t % kTile;
    for (size_t c = 0; c < k; ++c) rows[t * k + c] = tile[c * kTile];
  }
}

// FP8 panels: below kGemmMinM tokens (x as rounded f32 rows) the f32-FMA GEMVs with a whole panel
// column in one register (on views from a 4-column group, the codes decoded by GF(2)-affine maps
// where the CPU has VBMI and GFNI: Ice Lake, not Cascade Lake; the ISA levels are a line, so this
// one feature is asked here, once), else the f32 register tile on decoded blocks (x packed).
void Avx512Fp8PanelRows(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                        size_t ldy, bool accumulate, WorkerScratch& s) {
  static const bool affine = GetCpuFeatures().avx512_vbmi && GetCpuFeatures().gfni;
  // The affine kernel takes up to 16 tokens but where the GEMM's 6-token tiles are better
  // (Fp8GemmTakesFromAffine; against the GEMM of 12 x 2 tiles that decoded each block before its
  // tiles, it had been 1.57x / 1.18x / 1.11x at 8 / 12 / 16 tokens). x that arrives packed for the
  // GEMM (from 8 tokens, and a MoE expert's few rows, which GroupedX packs in the layout of the
  // largest expert's GEMM) is unpacked into rows (m·k floats) for it. On Ice Lake the GEMM at 4
  // tokens had decoded each block at ~half the affine GEMV's rate (the FP8 bench checkpoint's
  // 16-sequence step: experts at 8.1 GB/s on two cores).
  const bool affine_rows = affine && w.col0 % 4 == 0 && x.m <= avx512::kFp8AffineMaxTokens &&
                           !avx512::Fp8GemmTakesFromAffine(x.m);
  // Without it (Cascade Lake), the GEMV below kGemmMinM tokens, the GEMM from there: one core
  // (Ice Lake, this GEMV), [1536 x 3072] from DRAM, calls alternating in one process, the GEMM
  // against two GEMV calls of at most 7 tokens (each decoding every panel again; the path up to
  // 14 tokens while the GEMM decoded each block before its tiles): 8 / 10 / 12 / 14 tokens 0.79 /
  // 0.71 / 0.71 / 0.81x the time. Each token's y is the same bits either way.
  constexpr size_t kGemvTokens = kGemmMinM - 1;
  const float* xr = x.f32;
  size_t ld = x.ld;
  if (!xr && x.packed_f32 && (affine_rows || x.m <= kGemvTokens)) {
    float* rows = s.xpack.As<float>(x.m * w.cols);
    UnpackXRows(x.packed_f32, x.m, w.cols, rows);
    xr = rows;
    ld = w.cols;
  }
  if (affine_rows && xr)
    return RowsFromGroupStart(kFp8PanelRows, x.m, w.rows, n0, n1, y, ldy, accumulate, s.panel,
                              [&](size_t g0, size_t n, float* yg, size_t ldyg, bool acc) {
                                avx512::GemvFp8PanelsAffine(xr, ld, x.m, Fp8PanelRows(w, g0, n), yg,
                                                            ldyg, acc);
                              });
  if (xr && x.m <= kGemvTokens)
    return RowsFromGroupStart(kFp8PanelRows, x.m, w.rows, n0, n1, y, ldy, accumulate, s.panel,
                              [&](size_t g0, size_t n, float* yg, size_t ldyg, bool acc) {
                                avx512::GemvFp8Panels(xr, ld, x.m, Fp8PanelRows(w, g0, n), yg, ldyg,
                                                      acc);
                              });
  const float* xp = PackedXForAvx2(x, w.cols, s);
  float* pack = s.pack.As<float>(avx512::Fp8PanelPackFloats());
  RowsFromGroupStart(kFp8PanelRows, x.m, w.rows, n0, n1, y, ldy, accumulate, s.panel,
                     [&](size_t g0, size_t n, float* yg, size_t ldyg, bool acc) {
                       avx512::MatMulFp8Panels(xp, x.m, Fp8PanelRows(w, g0, n), yg, ldyg, acc,
                                               pack);
                     });
}

// ---- AVX-512 BF16 (with VNNI) ----
void Avx512DenseBf16Rows(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                         size_t ldy, bool accumulate, WorkerScratch& s) {
  const size_t k = w.cols, rows = n1 - n0;
  const bf16* wn = static_cast<const bf16*>(w.data) + n0 * w.row_stride;
  if (x.m < kGemmMinM)
    return avx512bf16::GemvBf16(x.b16, x.ld, x.m, wn, w.row_stride, k, rows, y + n0, ldy,
                                accumulate);
  bf16* pack = s.pack.As<bf16>(avx512bf16::PackElemsGemmBf16(k));
  avx512bf16::GemmBf16(x.b16, x.ld, x.m, wn, w.row_stride, k, rows, y + n0, ldy, accumulate, pack);
}

// FP8-block and MXFP4 codes decoded to exact bf16 (in registers for the GEMV, into packed 32-row
// panels for the GEMM) and fed to vdpbf16ps.
void Avx512QuantRows(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                     size_t ldy, bool accumulate, WorkerScratch& s) {
  const QuantRows q = QuantView(w, n0, n1);
  const bool fp8 = w.format == WeightFormat::kFp8Block;
  const size_t k = w.cols;
  float* yn = y + n0;
  if (x.m < kGemmMinM) {
    if (fp8) return avx512bf16::GemvFp8(x.b16, x.ld, x.m, q, yn, ldy, accumulate);
    return avx512bf16::GemvMxfp4(x.b16, x.ld, x.m, q, yn, ldy, accumulate);
  }
  bf16* pack = s.pack.As<bf16>(avx512bf16::PackElemsGemmBf16(k));
  if (fp8) {
    float* scales = s.fp8_scales.As<float>(32 * ((k + 127) / 128 + 2));
    uint32_t* xt = s.xpack.As<uint32_t>(avx512bf16::Fp8XTileElems(x.m, k));
    return avx512bf16::GemmFp8(x.b16, x.ld, x.m, q, yn, ldy, accumulate, pack, scales, xt);
  }
  bf16* panel = s.panel.As<bf16>(32 * ((k + 31) / 32 * 32));
  avx512bf16::GemmMxfp4(x.b16, x.ld, x.m, q, yn, ldy, accumulate, panel, pack);
}

// x packed once for the call (PrepareRows), or here by this thread.
void Avx512Bf16PanelRows(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                         size_t ldy, bool accumulate, WorkerScratch& s) {
  const uint32_t* xp = x.panel_pairs;
  if (!xp) {
    uint32_t* own = s.xpack.As<uint32_t>(avx512bf16::Bf16PanelXPairs(x.m, w.cols));
    avx512bf16::PackBf16PanelX(x.f32, x.ld, x.m, w.cols, own);
    xp = own;
  }
  RowsFromGroupStart(kBf16PanelRows, x.m, w.rows, n0, n1, y, ldy, accumulate, s.panel,
                     [&](size_t g0, size_t n, float* yg, size_t ldyg, bool acc) {
                       avx512bf16::MatMulBf16Panels(xp, x.m, Bf16PanelRows(w, g0, n), yg, ldyg,
                                                    acc);
                     });
}

// ---- AMX: the AVX-512 BF16 table with the bf16 and FP8 GEMMs on the tile unit ----

// x as the call packed it: 12-token pair tiles (a whole x below kGemmMinM rows) go to the
// vdpbf16ps kernel, AMX tiles to the tile unit; a row view is packed here, by m.
void AmxBf16PanelRows(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                      size_t ldy, bool accumulate, WorkerScratch& s) {
  if (x.panel_pairs || (!x.amx_tiles && x.m < kGemmMinM))
    return Avx512Bf16PanelRows(x, w, n0, n1, y, ldy, accumulate, s);
  const uint32_t* xt = x.amx_tiles;
  if (!xt) {
    uint32_t* own = s.xpack.As<uint32_t>(amx::XTileElems(x.m, w.cols));
    amx::PackX(x.f32, x.ld, x.m, w.cols, own);
    xt = own;
  }
  RowsFromGroupStart(kBf16PanelRows, x.m, w.rows, n0, n1, y, ldy, accumulate, s.panel,
                     [&](size_t g0, size_t n, float* yg, size_t ldyg, bool acc) {
                       amx::MatMulBf16Panels(xt, x.m, Bf16PanelRows(w, g0, n), yg, ldyg, acc);
                     });
}

// FP8-block GEMMs on the tile unit where the view's scale blocks fall on its 32-column steps;
// the GEMV, MXFP4 and odd views as on AVX-512 BF16.
void AmxQuantRows(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                  size_t ldy, bool accumulate, WorkerScratch& s) {
  if (w.format != WeightFormat::kFp8Block || x.m < kGemmMinM || w.col0 % 32 != 0 ||
      w.cols > amx::kMaxFp8Cols)
    return Avx512QuantRows(x, w, n0, n1, y, ldy, accumulate, s);
  const size_t k = w.cols;
  uint32_t* xt = s.xpack.As<uint32_t>(amx::XTileElems(x.m, k));
  amx::PackXBf16(x.b16, x.ld, x.m, k, xt);
  amx::GemmFp8(xt, x.m, QuantView(w, n0, n1), y + n0, ldy, accumulate,
               s.pack.As<bf16>(amx::Fp8PackElems(k)),
               s.fp8_scales.As<float>(amx::Fp8ScaleFloats(k)));
}

// MXFP4 × Q8 from kMxfp4I8TileMinTokens tokens on the tile unit (TDPBSSD), below it the VNNI
// kernel: the same bits either way. One thread, hot [1536, 3072], against the VNNI kernel: 8
// tokens 0.68-0.71x, 12 0.92-0.96x, 16 1.16-1.23x, 24 1.15-1.24x, 32 1.32-1.55x, 512
// 1.51-1.74x; but from 16 the MXFP4 slice's prefill 512 (~16 tokens per expert, weights from
// DRAM) measured no faster (experts 298-421 ms against 300-383, 3 rounds, with or without
// requesting the next pair's codes into L2), so the tiles start at 32.
constexpr size_t kMxfp4I8TileMinTokens = 32;

void AmxMxfp4I8Rows(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                    size_t ldy, bool accumulate, WorkerScratch& s) {
  if (x.m < kMxfp4I8TileMinTokens)
    return Q8GroupRows<avx512::MatMulMxfp4I8>(x, w, n0, n1, y, ldy, accumulate, s);
  RowsFromGroupStart(kMxfp4I8GroupRows, x.m, w.rows, n0, n1, y, ldy, accumulate, s.panel,
                     [&](size_t g0, size_t n, float* yg, size_t ldyg, bool acc) {
                       amx::MatMulMxfp4I8(x.q8, Mxfp4I8Rows(w, g0, n), yg, ldyg, acc, s);
                     });
}

// FP8 panels: 1 and 2 tokens the vdpbf16ps GEMV (amx::GemvFp8Panels, where the view's
// columns start on a 4-column group), from 3 the tile unit (views on its 32-column steps; up to 32
// tokens each step's B tiles decoded just before use), else the f32-FMA GEMV below kGemmMinM and
// the AVX2 panel GEMM above. One thread from DRAM, interleaved in one process (GEMV / tile time):
// 0.90-0.92 at 1 token, 1.0-1.02 at 2, 1.31-1.34 at 3. Emerald Rapids, FP8 bench checkpoint,
// alternating rounds: decode batch 1 53.3 / 60.3 / 47.3 / 41.6 / 51.0 tok/s with the byte-table
// GEMV, 44.6 / 49.5 / 47.3 / 40.9 / 45.6 with the f32 GEMV; 4 and 7 tokens from the LLC
// (bench_quant --hot) 10.8-12.4 GB/s on the tiles where the f32 GEMV reads 5.3-9.6. A whole-x call
// from kGemmMinM tokens hands over x already packed in AMX tiles (any slice of it, even of 1 or 2
// tokens, goes to the tile kernel).
void AmxFp8PanelRows(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                     size_t ldy, bool accumulate, WorkerScratch& s) {
  if (!x.amx_tiles && x.m <= amx::kFp8GemvMaxTokens && w.col0 % 4 == 0) {
    uint32_t* xp = s.xpack.As<uint32_t>(avx512bf16::Bf16PanelXPairs(x.m, w.cols));
    avx512bf16::PackBf16PanelX(x.f32, x.ld, x.m, w.cols, xp);
    return RowsFromGroupStart(kFp8PanelRows, x.m, w.rows, n0, n1, y, ldy, accumulate, s.panel,
                              [&](size_t g0, size_t n, float* yg, size_t ldyg, bool acc) {
                                amx::GemvFp8Panels(xp, x.m, Fp8PanelRows(w, g0, n), yg, ldyg, acc);
                              });
  }
  const bool tiles = amx::Fp8PanelTiles(w);
  if (!tiles && x.m < kGemmMinM)
    return RowsFromGroupStart(kFp8PanelRows, x.m, w.rows, n0, n1, y, ldy, accumulate, s.panel,
                              [&](size_t g0, size_t n, float* yg, size_t ldyg, bool acc) {
                                avx512::GemvFp8Panels(x.f32, x.ld, x.m, Fp8PanelRows(w, g0, n), yg,
                                                      ldyg, acc);
                              });
  if (!tiles) {
    if (x.amx_tiles) __builtin_trap();  // matmul.cc tiles x only for views the kernel takes
    return Avx2Fp8PanelRows(x, w, n0, n1, y, ldy, accumulate, s);
  }
  const size_t k = w.cols;
  const uint32_t* xt = x.amx_tiles;
  if (!xt) {
    uint32_t* own = s.xpack.As<uint32_t>(amx::XTileElems(x.m, k));
    amx::PackX(x.f32, x.ld, x.m, k, own);
    xt = own;
  }
  uint32_t* wb = s.pack.As<uint32_t>(amx::WTileElems(k));
  float* scales = s.fp8_scales.As<float>(amx::Fp8ScaleFloats(k));
  RowsFromGroupStart(kFp8PanelRows, x.m, w.rows, n0, n1, y, ldy, accumulate, s.panel,
                     [&](size_t g0, size_t n, float* yg, size_t ldyg, bool acc) {
                       amx::MatMulFp8Panels(xt, x.m, Fp8PanelRows(w, g0, n), yg, ldyg, acc, wb,
                                            scales);
                     });
}

void Avx512ToBf16Row(const float* x, size_t k, bf16* out, size_t ld) {
  avx512bf16::ToBf16Rows(x, k, 1, k, out, ld);
}

// ---- roofline probes ----

double ScalarSumBuffer(const float* data, size_t n) {
  float s[8] = {};
  for (size_t i = 0; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += data[i + j];
  return s[0] + s[7];
}

// The probes' sinks as the table's untyped pointer (float or int32 by probe).
template <typename T, void (*Chains)(size_t, T*)>
void Probe(size_t iterations, void* sink) {
  Chains(iterations, static_cast<T*>(sink));
}

// ---- the tables (index: WeightKind) ----

using enum XLayout;

constexpr IsaKernels kScalar = {
    Isa::kScalar,
    {ScalarRows, ScalarRows, ScalarRows, ScalarRows, Q8GroupRows<MatMulMxfp4I8Reference>,
     ScalarRows, ScalarRows},
    {kF32, kRoundedF32, kRoundedF32, kRoundedF32, kQ8, kRoundedF32, kRoundedF32},
    {kF32, kRoundedF32, kRoundedF32, kRoundedF32, kQ8, kRoundedF32, kRoundedF32},
    {8, 8, 8, 8, 8, 8, 8},
    {8, 8, 8, 8, 8, 8, 8},
    QuantizeRowQ8Reference,
    ScalarRoundRow,
    nullptr,
    SiluMulReference,
    AttentionTileScalar,
    ScalarSumBuffer,
    {nullptr, 0},
    {nullptr, 0},
    {nullptr, 0},
    {nullptr, 0},
};

constexpr IsaKernels kAvx2 = {
    Isa::kAvx2,
    {Avx2DenseF32Rows, Avx2DenseBf16Rows, Avx2QuantRows, Avx2QuantRows,
     Q8GroupRows<avx2::MatMulMxfp4I8>, PackedXBf16PanelRows<avx2::MatMulBf16Panels>,
     Avx2Fp8PanelRows},
    {kF32, kRoundedF32, kRoundedF32, kRoundedF32, kQ8, kPackedTiles, kPackedTiles},
    {kF32, kRoundedF32, kRoundedF32, kRoundedF32, kQ8, kPackedTiles, kPackedTiles},
    {8, 8, 8, 8, 8, kBf16PanelRows, kFp8PanelRows},
    {16, 16, 16, 16, 16, kBf16PanelRows, kFp8PanelRows},
    Avx2QuantizeRow,
    Avx2RoundRow,
    nullptr,
    avx2::SiluMul,
    avx2::AttentionTile,
    avx2::SumBuffer,
    {Probe<float, avx2::F32FmaChains>, 16},
    {nullptr, 0},  // no bf16 dot: the bf16 GEMMs run on f32 FMAs
    {Probe<int32_t, avx2::Int8DotChains>, 64},
    {nullptr, 0},
};

// AVX-512 with VNNI, without BF16 (Cascade Lake, Ice Lake): the AVX2 table with zmm kernels where
// they need no bf16 instruction: the bf16 and FP8 panels on f32 FMAs (x in AVX2's packed tiles),
// the MXFP4 × Q8 matmul on vpdpbusd (two 8-row groups per register, so its ranges are 16 rows),
// the f32 GEMV, attention and SiluMul.
constexpr IsaKernels kAvx512 = {
    Isa::kAvx512,
    {Avx512DenseF32Rows, Avx2DenseBf16Rows, Avx2QuantRows, Avx2QuantRows,
     Q8GroupRows<avx512::MatMulMxfp4I8>, PackedXBf16PanelRows<avx512::MatMulBf16Panels>,
     Avx512Fp8PanelRows},
    {kF32, kRoundedF32, kRoundedF32, kRoundedF32, kQ8, kPackedTiles, kPackedTiles},
    {kF32, kRoundedF32, kRoundedF32, kRoundedF32, kQ8, kPackedTiles, kRoundedF32},
    {8, 8, 8, 8, 2 * kMxfp4I8GroupRows, kBf16PanelRows, kFp8PanelRows},
    {16, 16, 16, 16, 2 * kMxfp4I8GroupRows, kBf16PanelRows, kFp8PanelRows},
    Avx2QuantizeRow,
    Avx2RoundRow,
    nullptr,
    avx512::SiluMul,
    avx512::AttentionTile,
    avx512::SumBuffer,
    {Probe<float, avx512::F32FmaChains>, 32},
    {nullptr, 0},  // no bf16 dot: the bf16 GEMMs run on f32 FMAs
    {Probe<int32_t, avx512::Int8DotChains>, 128},
    {nullptr, 0},
};

// The VNNI MXFP4 kernel computes two 8-row groups per register, so its ranges are 16 rows.
constexpr IsaKernels kAvx512Bf16 = {
    Isa::kAvx512Bf16,
    {Avx512DenseF32Rows, Avx512DenseBf16Rows, Avx512QuantRows, Avx512QuantRows,
     Q8GroupRows<avx512::MatMulMxfp4I8>, Avx512Bf16PanelRows, Avx2Fp8PanelRows},
    {kF32, kBf16, kBf16, kBf16, kQ8, kPanelPairs, kRoundedF32},
    {kF32, kBf16, kBf16, kBf16, kQ8, kPanelPairs, kRoundedF32},
    {8, 8, 8, 8, 2 * kMxfp4I8GroupRows, kBf16PanelRows, kFp8PanelRows},
    {32, 32, 32, 32, 2 * kMxfp4I8GroupRows, kBf16PanelRows, kFp8PanelRows},
    Avx2QuantizeRow,
    Avx2RoundRow,
    Avx512ToBf16Row,
    avx512::SiluMul,
    avx512::AttentionTile,
    avx512::SumBuffer,
    {Probe<float, avx512::F32FmaChains>, 32},
    {Probe<float, avx512bf16::Bf16DotChains>, 64},
    {Probe<int32_t, avx512::Int8DotChains>, 128},
    {nullptr, 0},
};

// The AVX-512 BF16 table with the tile unit's rows: it runs the bf16 panel and FP8 GEMMs (FP8 in
// panels by default: model::WeightLayoutFor), AVX-512 VBMI / f32 FMAs the FP8 panel GEMVs;
// everything else is kAvx512Bf16's.
constexpr IsaKernels WithTiles(IsaKernels t) {
  t.isa = Isa::kAmx;
  t.rows[static_cast<size_t>(WeightKind::kFp8Block)] = AmxQuantRows;
  t.rows[static_cast<size_t>(WeightKind::kBf16Panel)] = AmxBf16PanelRows;
  t.rows[static_cast<size_t>(WeightKind::kFp8Panel)] = AmxFp8PanelRows;
  t.rows[static_cast<size_t>(WeightKind::kMxfp4I8)] = AmxMxfp4I8Rows;
  t.whole_x_layout[static_cast<size_t>(WeightKind::kBf16Panel)] = kAmxTiles;
  t.whole_x_layout[static_cast<size_t>(WeightKind::kFp8Panel)] = kAmxTiles;
  t.gemv_x_layout[static_cast<size_t>(WeightKind::kFp8Panel)] = kRoundedF32;
  t.attention_tile = amx::AttentionTile;
  t.bf16_tile = {Probe<float, amx::Bf16TileChains>,
                 16.0 * 16 * 32 * 2 / amx::kBf16TileChainDivisor};
  return t;
}
constexpr IsaKernels kAmx = WithTiles(kAvx512Bf16);

}  // namespace

WeightKind KindOf(const WeightMatrix& w) {
  switch (w.format) {
    case WeightFormat::kDense:
      return w.dtype == DType::kF32 ? WeightKind::kDenseF32 : WeightKind::kDenseBf16;
    case WeightFormat::kFp8Block:
      return WeightKind::kFp8Block;
    case WeightFormat::kMxfp4:
      return WeightKind::kMxfp4;
    case WeightFormat::kMxfp4I8:
      return WeightKind::kMxfp4I8;
    case WeightFormat::kBf16Panel:
      return WeightKind::kBf16Panel;
    case WeightFormat::kFp8Panel:
      return WeightKind::kFp8Panel;
  }
  __builtin_unreachable();
}

const IsaKernels& KernelsFor(Isa isa) {
  switch (isa) {
    case Isa::kAmx:
      return kAmx;
    case Isa::kAvx512Bf16:
      return kAvx512Bf16;
    case Isa::kAvx512:
      return kAvx512;
    case Isa::kAvx2:
      return kAvx2;
    case Isa::kScalar:
      return kScalar;
  }
  return kScalar;
}

}  // namespace moeserve::kernels
