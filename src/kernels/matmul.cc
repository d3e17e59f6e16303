#include "kernels/matmul.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "kernels/activation.h"
#include "kernels/bf16_panels.h"
#include "kernels/fp8_panels.h"
#include "kernels/matmul_internal.h"
#include "kernels/mxfp4_i8.h"
#include "kernels/quant.h"

namespace moeserve::kernels {
namespace {

// m at or above this uses the packed GEMM microkernels; below it, streaming the weight rows once
// and reusing each row block for all m tokens from L1 costs no packing and is as fast or faster
// (single-core measurements on [1536, 3072]: m = 3..7 GEMV 50-140 GFLOP/s, GEMM 50-70; the
// packed GEMM reaches 120 at m = 16 and ~190 at m = 512).
constexpr size_t kGemmMinM = 8;

void CheckShapes(const float* x, size_t ldx, size_t m, const WeightMatrix& w, float* y,
                 size_t ldy) {
  CheckWeight(w);
  MOESERVE_CHECK(m == 0 || (ldx >= w.cols && ldy >= w.rows), "ldx ", ldx, " ldy ", ldy, " for [",
                 w.rows, ",", w.cols, "]");
  MOESERVE_CHECK(m == 0 || w.rows == 0 || (x && y && w.data), "null pointer");
}

thread_local ScratchBuffer tl_pack;
thread_local ScratchBuffer tl_x;
thread_local ScratchBuffer tl_panel;
thread_local ScratchBuffer tl_xpack;  // x packed for the AVX2 GEMM tiles
thread_local ScratchBuffer tl_fp8_scales;

// Scalar path: each row dequantized exactly to f32 (DequantizeRow), then the reference's running
// sum, so the scalar ISA path equals MatMulReference bit for bit.
void ScalarRows(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                size_t ldy, bool accumulate) {
  float* row = tl_panel.As<float>(w.cols);
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

void QuantRowsIsa(Isa isa, const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1,
                  float* y, size_t ldy, bool accumulate) {
  const QuantRows q = QuantView(w, n0, n1);
  const bool fp8 = w.format == WeightFormat::kFp8Block;
  const size_t k = w.cols;
  float* yn = y + n0;
  if (isa == Isa::kAvx512Bf16) {
    if (x.m < kGemmMinM) {
      if (fp8) return avx512bf16::GemvFp8(x.b16, x.ld, x.m, q, yn, ldy, accumulate);
      return avx512bf16::GemvMxfp4(x.b16, x.ld, x.m, q, yn, ldy, accumulate);
    }
    bf16* panel = tl_panel.As<bf16>(32 * ((k + 31) / 32 * 32));
    bf16* pack = tl_pack.As<bf16>(avx512bf16::PackElemsGemmBf16(k));
    if (fp8) {
      float* scales = tl_fp8_scales.As<float>(32 * ((k + 127) / 128 + 2));
      return avx512bf16::GemmFp8(x.b16, x.ld, x.m, q, yn, ldy, accumulate, panel, pack, scales);
    }
    return avx512bf16::GemmMxfp4(x.b16, x.ld, x.m, q, yn, ldy, accumulate, panel, pack);
  }
  // AVX2 (and AVX-512 without BF16): rows dequantized exactly to f32 in cache, then the f32
  // kernels on the bf16-rounded x.
  const auto decode = fp8 ? avx2::DecodeFp8Row : avx2::DecodeMxfp4Row;
  if (x.m < kGemmMinM) {
    float* row = tl_panel.As<float>(k);
    for (size_t r = 0; r < q.rows; ++r) {
      decode(q, r, row);
      avx2::GemvF32(x.f32, x.ld, x.m, row, k, k, 1, yn + r, ldy, accumulate);
    }
    return;
  }
  constexpr size_t kPanelRows = 16;
  float* panel = tl_panel.As<float>(kPanelRows * k);
  float* pack = tl_pack.As<float>(avx2::PackFloatsGemmBf16(k));
  float* xp = tl_xpack.As<float>(avx2::PackedXFloats(x.m, k));
  avx2::PackX(x.f32, x.ld, x.m, k, xp);
  for (size_t r0 = 0; r0 < q.rows; r0 += kPanelRows) {
    const size_t nr = std::min(kPanelRows, q.rows - r0);
    for (size_t r = 0; r < nr; ++r) decode(q, r0 + r, panel + r * k);
    avx2::GemmF32(xp, x.m, panel, k, k, nr, yn + r0, ldy, accumulate, pack);
  }
}

void Mxfp4I8Group(Isa isa, const Q8Rows& x, const WeightMatrix& w, float* y, size_t ldy,
                  bool accumulate) {
  if (isa == Isa::kScalar) return MatMulMxfp4I8Reference(x, w, y, ldy, accumulate);
  if (isa == Isa::kAvx512Bf16) return avx512bf16::MatMulMxfp4I8(x, w, y, ldy, accumulate);
  avx2::MatMulMxfp4I8(x, w, y, ldy, accumulate);
}

// Rows [n0, n1) of a weight whose kernels start on a `group`-row boundary: run(g0, n, y, ldy,
// accumulate) computes rows [g0, g0 + n) with g0 % group == 0. A range that does not start on a
// group (MoE's w3 half when the intermediate size is not a multiple of it) computes its first
// group into scratch and keeps the rows it owns.
template <typename Run>
void RowsFromGroupStart(size_t group, size_t m, size_t rows, size_t n0, size_t n1, float* y,
                        size_t ldy, bool accumulate, const Run& run) {
  if (n0 % group != 0) {
    const size_t g0 = n0 / group * group, g1 = std::min(g0 + group, rows), own = std::min(g1, n1);
    float* tmp = tl_panel.As<float>(m * group);
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

void Mxfp4I8RowsIsa(Isa isa, const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1,
                    float* y, size_t ldy, bool accumulate) {
  RowsFromGroupStart(8, x.m, w.rows, n0, n1, y, ldy, accumulate,
                     [&](size_t g0, size_t n, float* yg, size_t ldyg, bool acc) {
                       Mxfp4I8Group(isa, x.q8, Mxfp4I8Rows(w, g0, n), yg, ldyg, acc);
                     });
}

// x as the AVX2 panel kernels read it: packed once by PrepareRows, or here by this thread.
const float* PackedForAvx2Panels(const PreparedX& x, size_t k) {
  if (x.packed_f32) return x.packed_f32;
  float* xp = tl_xpack.As<float>(avx2::PackedXFloats(x.m, k));
  avx2::PackX(x.f32, x.ld, x.m, k, xp);
  return xp;
}

// Rows [n0, n1) of a kBf16Panel weight: x packed once for the call (by PrepareRows, or here per
// thread), then the panel kernel (vdpbf16ps on AVX-512 BF16, widening to f32 FMAs on AVX2).
void Bf16PanelRowsIsa(Isa isa, const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1,
                      float* y, size_t ldy, bool accumulate) {
  if (isa == Isa::kAvx512Bf16) {
    const uint32_t* xp = x.panel_pairs;
    if (!xp) {
      uint32_t* own = tl_xpack.As<uint32_t>(avx512bf16::Bf16PanelXPairs(x.m, w.cols));
      avx512bf16::PackBf16PanelX(x.f32, x.ld, x.m, w.cols, own);
      xp = own;
    }
    return RowsFromGroupStart(kBf16PanelRows, x.m, w.rows, n0, n1, y, ldy, accumulate,
                              [&](size_t g0, size_t n, float* yg, size_t ldyg, bool acc) {
                                avx512bf16::MatMulBf16Panels(xp, x.m, Bf16PanelRows(w, g0, n), yg,
                                                             ldyg, acc);
                              });
  }
  const float* xp = PackedForAvx2Panels(x, w.cols);
  RowsFromGroupStart(kBf16PanelRows, x.m, w.rows, n0, n1, y, ldy, accumulate,
                     [&](size_t g0, size_t n, float* yg, size_t ldyg, bool acc) {
                       avx2::MatMulBf16Panels(xp, x.m, Bf16PanelRows(w, g0, n), yg, ldyg, acc);
                     });
}

// Rows [n0, n1) of a kFp8Panel weight, as Bf16PanelRowsIsa.
void Fp8PanelRowsIsa(const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                     size_t ldy, bool accumulate) {
  const float* xp = PackedForAvx2Panels(x, w.cols);
  float* pack = tl_pack.As<float>(avx2::Fp8PanelPackFloats(w.cols));
  RowsFromGroupStart(kFp8PanelRows, x.m, w.rows, n0, n1, y, ldy, accumulate,
                     [&](size_t g0, size_t n, float* yg, size_t ldyg, bool acc) {
                       avx2::MatMulFp8Panels(xp, x.m, Fp8PanelRows(w, g0, n), yg, ldyg, acc, pack);
                     });
}

}  // namespace

void CheckWeight(const WeightMatrix& w) {
  switch (w.format) {
    case WeightFormat::kDense:
      MOESERVE_CHECK(w.dtype == DType::kBF16 || w.dtype == DType::kF32,
                     "MatMul: unsupported dense weight dtype ", DTypeName(w.dtype));
      MOESERVE_CHECK(w.row_stride >= w.cols, "row_stride ", w.row_stride, " < cols ", w.cols);
      return;
    case WeightFormat::kFp8Block:
      MOESERVE_CHECK(w.dtype == DType::kF8E4M3, "FP8 block weight with dtype ", DTypeName(w.dtype));
      MOESERVE_CHECK(w.row_stride >= w.cols, "row_stride ", w.row_stride, " < cols ", w.cols);
      MOESERVE_CHECK(w.rows == 0 || w.cols == 0 ||
                         (w.scales && w.scale_stride >= (w.col0 + w.cols + 127) / 128),
                     "FP8 block weight: scales missing or scale_stride ", w.scale_stride,
                     " too small for columns up to ", w.col0 + w.cols);
      return;
    case WeightFormat::kMxfp4I8:
      MOESERVE_CHECK(w.dtype == DType::kU8, "MXFP4 weight with dtype ", DTypeName(w.dtype));
      MOESERVE_CHECK(w.cols % 32 == 0, "MXFP4 weight: cols ", w.cols, " not a multiple of 32");
      MOESERVE_CHECK(w.row_stride >= w.cols / 32 * 128 && w.scale_stride >= w.cols / 32 * 8 &&
                         (w.rows == 0 || w.cols == 0 || w.scales),
                     "repacked MXFP4 weight: strides ", w.row_stride, " / ", w.scale_stride,
                     " too small for ", w.cols, " columns");
      return;
    case WeightFormat::kFp8Panel:
      MOESERVE_CHECK(w.dtype == DType::kF8E4M3, "FP8 panel weight with dtype ", DTypeName(w.dtype));
      MOESERVE_CHECK(w.row_stride >= w.cols * kFp8PanelRows && (w.rows == 0 || w.scales),
                     "FP8 panel weight: stride ", w.row_stride, " or scales for ", w.cols,
                     " columns");
      return;
    case WeightFormat::kBf16Panel:
      MOESERVE_CHECK(w.dtype == DType::kBF16, "bf16 panel weight with dtype ", DTypeName(w.dtype));
      MOESERVE_CHECK(w.row_stride >= w.cols * kBf16PanelRows, "bf16 panel stride ", w.row_stride,
                     " too small for ", w.cols, " columns");
      return;
    case WeightFormat::kMxfp4:
      MOESERVE_CHECK(w.dtype == DType::kU8, "MXFP4 weight with dtype ", DTypeName(w.dtype));
      MOESERVE_CHECK(w.cols % 32 == 0, "MXFP4 weight: cols ", w.cols, " not a multiple of 32");
      MOESERVE_CHECK(w.row_stride >= w.cols / 2, "MXFP4 row_stride ", w.row_stride, " bytes < ",
                     w.cols / 2);
      MOESERVE_CHECK(w.rows == 0 || w.cols == 0 || (w.scales && w.scale_stride >= w.cols / 32),
                     "MXFP4 weight: scales missing or scale_stride ", w.scale_stride, " < ",
                     w.cols / 32);
      return;
  }
  Fail("MatMul: unknown weight format");
}

void* ScratchBuffer::Get(size_t bytes) {
  if (bytes > size_) {
    std::free(data_);
    size_ = std::max<size_t>((bytes + 63) / 64 * 64, 64);
    data_ = std::aligned_alloc(64, size_);
    MOESERVE_CHECK(data_ != nullptr, "out of memory for ", size_, " bytes of scratch");
  }
  return data_;
}

namespace {

// Row i of the prepared x from x row rows[i] (rows: null for the identity), on the pool's threads
// or (pool null) on the calling one.
// `whole`: the result serves whole-x calls only (never Rows()), so layouts tiled across rows
// are allowed.
PreparedX PrepareRows(Isa isa, const WeightMatrix& w, const float* x, size_t ldx,
                      const size_t* rows, size_t m, size_t k, ScratchBuffer& buf, ThreadPool* pool,
                      bool whole = false) {
  auto src = [&](size_t i) { return x + (rows ? rows[i] : i) * ldx; };
  auto for_rows = [&](const auto& fn) {
    auto range = [&](size_t i0, size_t i1) {
      for (size_t i = i0; i < i1; ++i) fn(i);
    };
    if (pool)
      pool->ParallelFor(m, 1, range);
    else
      range(0, m);
  };
  PreparedX px;
  px.m = m;
  if (w.format == WeightFormat::kMxfp4I8) {
    // One buffer: q [m, k] bytes, then d and sum [m, k / 32] each.
    const size_t nb = k / 32, q_bytes = (m * k + 63) / 64 * 64;
    uint8_t* base = buf.As<uint8_t>(q_bytes + 2 * m * nb * 4);
    int8_t* q = reinterpret_cast<int8_t*>(base);
    float* d = reinterpret_cast<float*>(base + q_bytes);
    int32_t* sum = reinterpret_cast<int32_t*>(base + q_bytes + m * nb * 4);
    for_rows([&](size_t i) {
      if (isa == Isa::kScalar)
        QuantizeRowQ8Reference(src(i), k, q + i * k, d + i * nb, sum + i * nb);
      else
        avx2::QuantizeRowsQ8(src(i), ldx, 1, k, q + i * k, k, d + i * nb, sum + i * nb, nb);
    });
    px.q8 = {q, d, sum, k, nb, m, k};
    return px;
  }
  if (w.dtype == DType::kF32) {
    if (!rows) {
      px.f32 = x;
      px.ld = ldx;
      return px;
    }
    float* out = buf.As<float>(m * k);
    for_rows([&](size_t i) { std::memcpy(out + i * k, src(i), k * sizeof(float)); });
    px.f32 = out;
    px.ld = k;
    return px;
  }
  // Rows padded to 32 elements: whole vectors, even for pairs; the padding is zero.
  px.ld = (k + 31) / 32 * 32;
  // Whole x for a panel kernel: packed here once, a tile of tokens per task, instead of by every
  // thread in Bf16PanelRowsIsa / Fp8PanelRowsIsa (each packed all of x: ~2% of a 512-token
  // prefill on Zen 4, 2 threads). pack_slot(row or null for padding, tile, slot in the tile).
  const auto pack_tiles = [&](size_t tile_tokens, const auto& pack_slot) {
    auto pack = [&, ld = px.ld](size_t tile0, size_t tile1) {
      thread_local ScratchBuffer tl_row;  // this worker's own: one bf16-rounded row
      float* row = tl_row.As<float>(ld);
      for (size_t tile = tile0; tile < tile1; ++tile)
        for (size_t s = 0; s < tile_tokens; ++s) {
          const size_t i = tile * tile_tokens + s;
          if (i < m) avx2::RoundRowsToBf16(src(i), ldx, 1, k, row, ld);
          pack_slot(i < m ? row : nullptr, tile, s);
        }
    };
    const size_t tiles = (m + tile_tokens - 1) / tile_tokens;
    if (pool)
      pool->ParallelFor(tiles, 1, pack);
    else
      pack(0, tiles);
  };
  if (whole && isa == Isa::kAvx512Bf16 && w.format == WeightFormat::kBf16Panel) {
    constexpr size_t kTile = avx512bf16::kBf16PanelXTile;
    const size_t pairs = (k + 1) / 2;
    uint32_t* xp = buf.As<uint32_t>(avx512bf16::Bf16PanelXPairs(m, k));
    pack_tiles(kTile, [&](const float* row, size_t tile, size_t s) {
      avx512bf16::PackBf16PanelXSlot(row, k, xp + tile * pairs * kTile + s);
    });
    px.panel_pairs = xp;
    return px;
  }
  if (whole && isa == Isa::kAvx2 &&
      (w.format == WeightFormat::kBf16Panel || w.format == WeightFormat::kFp8Panel)) {
    constexpr size_t kTile = avx2::kPackedXTile;
    float* xp = buf.As<float>(avx2::PackedXFloats(m, k));
    pack_tiles(kTile, [&](const float* row, size_t tile, size_t s) {
      avx2::PackXSlot(row, k, xp + tile * kTile * k + s);
    });
    px.packed_f32 = xp;
    return px;
  }
  const bool panel = w.format == WeightFormat::kBf16Panel || w.format == WeightFormat::kFp8Panel;
  if (isa == Isa::kAvx512Bf16 && !panel) {
    bf16* out = buf.As<bf16>(m * px.ld);
    for_rows([&](size_t i) { avx512bf16::ToBf16Rows(src(i), ldx, 1, k, out + i * px.ld, px.ld); });
    px.b16 = out;
    return px;
  }
  float* out = buf.As<float>(m * px.ld);
  for_rows([&](size_t i) {
    float* o = out + i * px.ld;
    if (isa == Isa::kScalar) {
      for (size_t j = 0; j < k; ++j) o[j] = RoundToBf16(src(i)[j]);
      std::fill(o + k, o + px.ld, 0.0f);
    } else {
      avx2::RoundRowsToBf16(src(i), ldx, 1, k, o, px.ld);
    }
  });
  px.f32 = out;
  return px;
}

}  // namespace

PreparedX PrepareX(Isa isa, const WeightMatrix& w, const float* x, size_t ldx, size_t m, size_t k,
                   ScratchBuffer& buf) {
  return PrepareRows(isa, w, x, ldx, nullptr, m, k, buf, nullptr);
}

PreparedX PrepareXParallel(Isa isa, const WeightMatrix& w, const float* x, size_t ldx,
                           const size_t* rows, size_t m, size_t k, ScratchBuffer& buf,
                           ThreadPool& pool) {
  return PrepareRows(isa, w, x, ldx, rows, m, k, buf, &pool);
}

size_t MatMulRowGrain(Isa isa, const WeightMatrix& w, size_t m) {
  if (isa == Isa::kScalar) return 8;
  if (w.format == WeightFormat::kBf16Panel) return kBf16PanelRows;
  if (w.format == WeightFormat::kFp8Panel) return kFp8PanelRows;
  // The AVX-512 MXFP4 kernel computes two 8-row groups per register.
  if (w.format == WeightFormat::kMxfp4I8 && isa == Isa::kAvx512Bf16) return 16;
  if (m < kGemmMinM) return 8;
  return isa == Isa::kAvx512Bf16 ? 32 : 16;
}

void MatMulRows(Isa isa, const PreparedX& x, const WeightMatrix& w, size_t n0, size_t n1, float* y,
                size_t ldy, bool accumulate) {
  if (n0 >= n1 || x.m == 0) return;
  if (w.format == WeightFormat::kMxfp4I8)
    return Mxfp4I8RowsIsa(isa, x, w, n0, n1, y, ldy, accumulate);
  const size_t rows = n1 - n0, k = w.cols;
  float* yn = y + n0;
  if (isa == Isa::kScalar) return ScalarRows(x, w, n0, n1, y, ldy, accumulate);
  if (w.format == WeightFormat::kBf16Panel)
    return Bf16PanelRowsIsa(isa, x, w, n0, n1, y, ldy, accumulate);
  if (w.format == WeightFormat::kFp8Panel) return Fp8PanelRowsIsa(x, w, n0, n1, y, ldy, accumulate);
  if (w.format != WeightFormat::kDense) return QuantRowsIsa(isa, x, w, n0, n1, y, ldy, accumulate);
  if (w.dtype == DType::kF32) {
    const float* wn = static_cast<const float*>(w.data) + n0 * w.row_stride;
    if (isa == Isa::kAvx512Bf16)
      return avx512bf16::GemvF32(x.f32, x.ld, x.m, wn, w.row_stride, k, rows, yn, ldy, accumulate);
    return avx2::GemvF32(x.f32, x.ld, x.m, wn, w.row_stride, k, rows, yn, ldy, accumulate);
  }
  const bf16* wn = static_cast<const bf16*>(w.data) + n0 * w.row_stride;
  if (isa == Isa::kAvx512Bf16) {
    if (x.m < kGemmMinM)
      return avx512bf16::GemvBf16(x.b16, x.ld, x.m, wn, w.row_stride, k, rows, yn, ldy, accumulate);
    bf16* pack = tl_pack.As<bf16>(avx512bf16::PackElemsGemmBf16(k));
    return avx512bf16::GemmBf16(x.b16, x.ld, x.m, wn, w.row_stride, k, rows, yn, ldy, accumulate,
                                pack);
  }
  if (x.m < kGemmMinM)
    return avx2::GemvBf16(x.f32, x.ld, x.m, wn, w.row_stride, k, rows, yn, ldy, accumulate);
  float* pack = tl_pack.As<float>(avx2::PackFloatsGemmBf16(k));
  float* xp = tl_xpack.As<float>(avx2::PackedXFloats(x.m, k));
  avx2::PackX(x.f32, x.ld, x.m, k, xp);
  avx2::GemmBf16(xp, x.m, wn, w.row_stride, k, rows, yn, ldy, accumulate, pack);
}

void MatMul(const float* x, size_t ldx, size_t m, const WeightMatrix& w, float* y, size_t ldy,
            ThreadPool& pool, bool accumulate) {
  CheckShapes(x, ldx, m, w, y, ldy);
  if (m == 0 || w.rows == 0) return;
  if (w.cols == 0) {
    if (!accumulate)
      for (size_t t = 0; t < m; ++t) std::fill(y + t * ldy, y + t * ldy + w.rows, 0.0f);
    return;
  }
  const Isa isa = BestIsa();
  const PreparedX px = PrepareRows(isa, w, x, ldx, nullptr, m, w.cols, tl_x,
                                   m >= kGemmMinM ? &pool : nullptr, /*whole=*/true);
  pool.ParallelFor(w.rows, MatMulRowGrain(isa, w, m), [&](size_t n0, size_t n1) {
    MatMulRows(isa, px, w, n0, n1, y, ldy, accumulate);
  });
}

void MatMulSharedX(const float* x, size_t ldx, size_t m, std::span<const MatMulOutput> outs,
                   ThreadPool& pool) {
  if (outs.empty()) return;
  const WeightMatrix& w0 = *outs[0].w;
  bool same = true;
  for (const MatMulOutput& o : outs) {
    CheckShapes(x, ldx, m, *o.w, o.y, o.ldy);
    same = same && o.w->format == w0.format && o.w->dtype == w0.dtype && o.w->cols == w0.cols &&
           o.w->cols > 0;
  }
  if (!same || m == 0) {  // x is prepared per weight format: one MatMul each
    for (const MatMulOutput& o : outs) MatMul(x, ldx, m, *o.w, o.y, o.ldy, pool);
    return;
  }
  const Isa isa = BestIsa();
  const PreparedX px = PrepareRows(isa, w0, x, ldx, nullptr, m, w0.cols, tl_x,
                                   m >= kGemmMinM ? &pool : nullptr, /*whole=*/true);
  // The weights' rows back to back, each padded to the row grain so that every range a thread
  // gets starts on a grain boundary of its weight.
  const size_t grain = MatMulRowGrain(isa, w0, m);
  std::vector<size_t> offset(outs.size() + 1, 0);
  for (size_t i = 0; i < outs.size(); ++i)
    offset[i + 1] = offset[i] + (outs[i].w->rows + grain - 1) / grain * grain;
  pool.ParallelFor(offset.back(), grain, [&](size_t n0, size_t n1) {
    for (size_t i = 0; i < outs.size(); ++i) {
      const size_t lo = offset[i], b = std::max(n0, lo), e = std::min(n1, lo + outs[i].w->rows);
      if (b < e) MatMulRows(isa, px, *outs[i].w, b - lo, e - lo, outs[i].y, outs[i].ldy, false);
    }
  });
}

void MatMulReference(const float* x, size_t ldx, size_t m, const WeightMatrix& w, float* y,
                     size_t ldy, bool accumulate) {
  CheckShapes(x, ldx, m, w, y, ldy);
  if (w.format == WeightFormat::kMxfp4I8) {
    const size_t nb = w.cols / 32;
    std::vector<int8_t> q(m * w.cols);
    std::vector<float> d(m * nb);
    std::vector<int32_t> sum(m * nb);
    for (size_t t = 0; t < m; ++t)
      QuantizeRowQ8Reference(x + t * ldx, w.cols, q.data() + t * w.cols, d.data() + t * nb,
                             sum.data() + t * nb);
    return MatMulMxfp4I8Reference({q.data(), d.data(), sum.data(), w.cols, nb, m, w.cols}, w, y,
                                  ldy, accumulate);
  }
  // W dequantized exactly to f32 (bf16 and quantized formats); x rounded to bf16 unless W is f32.
  const bool round_x = !(w.format == WeightFormat::kDense && w.dtype == DType::kF32);
  std::vector<float> row(w.cols);
  for (size_t n = 0; n < w.rows; ++n) {
    DequantizeRow(w, n, 0, w.cols, row.data());
    for (size_t t = 0; t < m; ++t) {
      float sum = 0;
      for (size_t k = 0; k < w.cols; ++k) {
        const float xk = x[t * ldx + k];
        sum += (round_x ? RoundToBf16(xk) : xk) * row[k];
      }
      float& out = y[t * ldy + n];
      out = accumulate ? out + sum : sum;
    }
  }
}

void SiluMulIsa(Isa isa, const float* gate, const float* up, float* out, size_t n) {
  switch (isa) {
    case Isa::kAvx512Bf16:
      return avx512bf16::SiluMul(gate, up, out, n);
    case Isa::kAvx512:
    case Isa::kAvx2:
      return avx2::SiluMul(gate, up, out, n);
    case Isa::kScalar:
      return SiluMulReference(gate, up, out, n);
  }
}

}  // namespace moeserve::kernels
