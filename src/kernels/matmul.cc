#include "kernels/matmul.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "kernels/bf16_panels.h"
#include "kernels/fp8_panels.h"
#include "kernels/isa_kernels.h"
#include "kernels/matmul_internal.h"
#include "kernels/mxfp4_i8.h"
#include "kernels/quant.h"

namespace moeserve::kernels {
namespace {

void CheckShapes(const float* x, size_t ldx, size_t m, const WeightMatrix& w, float* y,
                 size_t ldy) {
  CheckWeight(w);
  MOESERVE_CHECK(m == 0 || (ldx >= w.cols && ldy >= w.rows), "ldx ", ldx, " ldy ", ldy, " for [",
                 w.rows, ",", w.cols, "]");
  MOESERVE_CHECK(m == 0 || w.rows == 0 || (x && y && w.data), "null pointer");
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
      MOESERVE_CHECK(w.row_stride >= Bf16PanelCols(w.cols) * kBf16PanelRows, "bf16 panel stride ",
                     w.row_stride, " too small for ", w.cols, " columns");
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

namespace {

// Tokens per tile of a tiled x layout.
size_t TileTokens(XLayout layout) {
  switch (layout) {
    case XLayout::kPanelPairs:
      return avx512bf16::kBf16PanelXTile;
    case XLayout::kAmxTiles:
      return amx::kXTileTokens;
    default:
      return avx2::kPackedXTile;
  }
}

// Elements (uint32 pairs or floats) of one tile of k columns.
size_t TileElems(XLayout layout, size_t k) {
  switch (layout) {
    case XLayout::kPanelPairs:
      return (k + 1) / 2 * avx512bf16::kBf16PanelXTile;
    case XLayout::kAmxTiles:
      return amx::XTileElems(1, k);
    default:
      return k * avx2::kPackedXTile;
  }
}

// The whole-x layout for m rows of x over w (`grouped`: MoE experts' rows, GroupedX): the table's
// GEMV layout below kGemmMinM rows (amx: bf16 panels the vdpbf16ps GEMV's 12-token pair tiles,
// which the tile kernel's B tiles would not beat; FP8 panels f32 rows for their GEMVs). FP8
// panels take the AMX tiles for whole calls only, and only views the tile kernel takes
// (amx::Fp8PanelTiles); experts' rows stay f32, packed by each expert's item, so experts with 1
// or 2 rows keep the GEMV.
XLayout WholeLayoutForM(const IsaKernels& kern, const WeightMatrix& w, size_t m, bool grouped) {
  const WeightKind kind = KindOf(w);
  const size_t i = static_cast<size_t>(kind);
  const XLayout layout = m < kGemmMinM ? kern.gemv_x_layout[i] : kern.whole_x_layout[i];
  if (layout != XLayout::kAmxTiles || kind != WeightKind::kFp8Panel) return layout;
  return !grouped && amx::Fp8PanelTiles(w) ? layout : XLayout::kRoundedF32;
}

// Whole x for a panel kernel (a tiled layout), packed once for the call, a tile per task, instead
// of by every thread in the row kernels (each packed all of x: ~2% of a 512-token prefill on Zen
// 4, 2 threads). Slot s of tile t holds x row row_of(t, s) (k values), or zeros for null.
template <typename RowOf>
PreparedX PackTiles(KernelContext& ctx, XLayout layout, size_t k, size_t tiles, ScratchBuffer& buf,
                    bool parallel, const RowOf& row_of) {
  const IsaKernels& kern = ctx.kernels();
  const size_t tt = TileTokens(layout), elems = TileElems(layout, k);
  PreparedX px;
  px.ld = (k + 31) / 32 * 32;
  uint32_t* pairs = nullptr;
  uint32_t* amx_tiles = nullptr;
  float* packed = nullptr;
  if (layout == XLayout::kPanelPairs)
    px.panel_pairs = pairs = buf.As<uint32_t>(tiles * elems);
  else if (layout == XLayout::kAmxTiles)
    px.amx_tiles = amx_tiles = buf.As<uint32_t>(tiles * elems);
  else
    px.packed_f32 = packed = buf.As<float>(tiles * elems);
  auto range = [&](size_t tile0, size_t tile1, size_t thread) {
    for (size_t tile = tile0; tile < tile1; ++tile) {
      // Straight from x: the tile packers round as they pack.
      if (pairs) {
        const float* rows[avx512bf16::kBf16PanelXTile];
        for (size_t s = 0; s < tt; ++s) rows[s] = row_of(tile, s);
        avx512bf16::PackBf16PanelXTile(rows, k, pairs + tile * elems);
        continue;
      }
      if (amx_tiles) {
        const float* rows[amx::kXTileTokens];
        for (size_t s = 0; s < tt; ++s) rows[s] = row_of(tile, s);
        amx::PackXTile(rows, k, amx_tiles + tile * elems);
        continue;
      }
      float* row = ctx.worker(thread).x_row.As<float>(px.ld);
      for (size_t s = 0; s < tt; ++s) {
        const float* xr = row_of(tile, s);
        if (xr) kern.round_row_to_bf16(xr, k, row, px.ld);
        avx2::PackXSlot(xr ? row : nullptr, k, packed + tile * elems + s);
      }
    }
  };
  if (parallel)
    ctx.pool().ParallelForWithThread(tiles, 1, range);
  else
    range(0, tiles, 0);
  return px;
}

// Row i of the prepared x from x row rows[i] (rows: null for the identity), on the pool's threads
// (`parallel`) or on the calling one, in the layout the ISA's table asks for w's kind.
// `whole`: the result serves whole-x calls only (never Rows()), so layouts tiled across rows
// are allowed.
PreparedX PrepareRows(KernelContext& ctx, const WeightMatrix& w, const float* x, size_t ldx,
                      const size_t* rows, size_t m, size_t k, ScratchBuffer& buf, bool parallel,
                      bool whole = false) {
  const IsaKernels& kern = ctx.kernels();
  const XLayout whole_layout = WholeLayoutForM(kern, w, m, /*grouped=*/false);
  const XLayout layout = whole ? whole_layout : RowLayout(whole_layout);
  auto src = [&](size_t i) { return x + (rows ? rows[i] : i) * ldx; };
  auto for_rows = [&](const auto& fn) {
    auto range = [&](size_t i0, size_t i1) {
      for (size_t i = i0; i < i1; ++i) fn(i);
    };
    if (parallel)
      ctx.pool().ParallelFor(m, 1, range);
    else
      range(0, m);
  };
  PreparedX px;
  px.m = m;
  switch (layout) {
    case XLayout::kQ8: {
      px = AllocateQ8X(m, k, buf);
      for_rows([&](size_t i) { QuantizeIntoQ8X(ctx, px, i, 0, src(i), k); });
      return px;
    }
    case XLayout::kF32: {
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
    default:
      break;
  }
  // Rows padded to 32 elements: whole vectors, even for pairs; the padding is zero.
  px.ld = (k + 31) / 32 * 32;
  if (IsTiled(layout)) {
    const size_t tt = TileTokens(layout);
    PreparedX tiled =
        PackTiles(ctx, layout, k, (m + tt - 1) / tt, buf, parallel, [&](size_t tile, size_t s) {
          const size_t i = tile * tt + s;
          return i < m ? src(i) : nullptr;
        });
    tiled.m = m;
    return tiled;
  }
  switch (layout) {
    case XLayout::kBf16: {
      bf16* out = buf.As<bf16>(m * px.ld);
      for_rows([&](size_t i) { kern.row_to_bf16(src(i), k, out + i * px.ld, px.ld); });
      px.b16 = out;
      return px;
    }
    default: {
      float* out = buf.As<float>(m * px.ld);
      for_rows([&](size_t i) { kern.round_row_to_bf16(src(i), k, out + i * px.ld, px.ld); });
      px.f32 = out;
      return px;
    }
  }
}

// Tokens [t0, t0 + count) of x prepared for a whole-x call; t0 is a multiple of a tiled layout's
// tile tokens.
PreparedX TokenSlice(const PreparedX& px, size_t k, size_t t0, size_t count) {
  PreparedX v = px;
  v.m = count;
  if (v.amx_tiles) {
    v.amx_tiles += t0 / amx::kXTileTokens * TileElems(XLayout::kAmxTiles, k);
  } else if (v.panel_pairs) {
    v.panel_pairs += t0 / avx512bf16::kBf16PanelXTile * TileElems(XLayout::kPanelPairs, k);
  } else if (v.packed_f32) {
    v.packed_f32 += t0 / avx2::kPackedXTile * TileElems(XLayout::kPackedTiles, k);
  } else {
    v = px.Rows(t0, count);
  }
  return v;
}

// Items per thread for each token block of the dynamic GEMM schedule: enough for a thread that
// runs at a third of the other's speed to end within an item of it.
constexpr size_t kGemmItemsPerThread = 6;
// The same over avx2::PackX's x (the avx2 and avx512 tables), whose token block is the whole x: the
// avx512 kernel keeps a block of panels in L2 while every token's x passes through L1, so an item
// of few panels reads x for little work. Two threads, [1024 x 3072] / [1536 x 3072] at 512
// tokens, 2 x 15 calls alternating in one process (Ice Lake): 244-264 / 249-268 GFLOP/s at 2
// items per thread against 227-234 / 250-253 at 6; the AVX2 kernel within 3% either way.
constexpr size_t kPackedXItemsPerThread = 2;

// Runs a whole-x call's rows [0, rows) of W (ranges in multiples of `grain`) over x prepared for
// it: fn(x', t0, n0, n1, thread) computes y rows [t0, t0 + x'.m) and columns [n0, n1).
// Decode (x below kGemmMinM rows) and row kernels that pack x themselves split the rows
// statically, a range per thread (a thread keeps touching the same weight rows from call to
// call). A GEMM over a tiled x takes items of (token block, row chunk) handed out one at a time,
// all chunks of a token block before the next block: a thread running slower (an SMT sibling or a
// neighbour busy, a lower clock) takes fewer items instead of the call waiting on its half. The
// token block is the one the row kernel keeps cached while its rows pass, so every item is whole
// passes of the kernel, and both threads read W once per token block between them, as the
// static halves did.
template <typename Fn>
void ForEachGemmItem(KernelContext& ctx, const PreparedX& px, const WeightMatrix& w, size_t rows,
                     size_t grain, const Fn& fn) {
  const size_t k = w.cols;
  ThreadPool& pool = ctx.pool();
  const bool tiled = px.amx_tiles || px.panel_pairs || px.packed_f32;
  if (px.m < kGemmMinM || !tiled || pool.num_threads() == 1) {
    pool.ParallelForWithThread(
        rows, grain, [&](size_t n0, size_t n1, size_t thread) { fn(px, 0, n0, n1, thread); });
    return;
  }
  const size_t tb = px.amx_tiles ? (KindOf(w) == WeightKind::kBf16Panel ? amx::Bf16XTokenBlock(k)
                                                                        : amx::XTokenBlock(k))
                    : px.panel_pairs ? avx512bf16::XTokenBlock(k)
                                     : px.m;
  const size_t blocks = (px.m + tb - 1) / tb;
  const size_t target =
      pool.num_threads() * (px.packed_f32 ? kPackedXItemsPerThread : kGemmItemsPerThread);
  const size_t chunk = std::max<size_t>(1, (rows / grain + target - 1) / target) * grain;
  const size_t chunks = (rows + chunk - 1) / chunk;
  pool.ParallelForDynamic(blocks * chunks, [&](size_t item, size_t thread) {
    const size_t t0 = item / chunks * tb, n0 = item % chunks * chunk;
    fn(TokenSlice(px, k, t0, std::min(tb, px.m - t0)), t0, n0, std::min(rows, n0 + chunk), thread);
  });
}

}  // namespace

PreparedX AllocateQ8X(size_t m, size_t k, ScratchBuffer& buf) {
  // One buffer: q [m, k] bytes, then d and sum [m, k / 32] each.
  const size_t nb = k / kMxfp4I8Block, q_bytes = (m * k + 63) / 64 * 64;
  uint8_t* base = buf.As<uint8_t>(q_bytes + 2 * m * nb * 4);
  PreparedX px;
  px.m = m;
  px.q8 = {reinterpret_cast<int8_t*>(base),
           reinterpret_cast<float*>(base + q_bytes),
           reinterpret_cast<int32_t*>(base + q_bytes + m * nb * 4),
           k,
           nb,
           m,
           k};
  return px;
}

void QuantizeIntoQ8X(const KernelContext& ctx, const PreparedX& px, size_t row, size_t col0,
                     const float* x, size_t n) {
  MOESERVE_CHECK(
      col0 % kMxfp4I8Block == 0 && n % kMxfp4I8Block == 0 && col0 + n <= px.q8.k && row < px.m,
      "QuantizeIntoQ8X: columns [", col0, ", ", col0 + n, ") of row ", row);
  // The buffer is the caller's scratch (AllocateQ8X); PreparedX holds it read-only for kernels.
  const Q8Rows& q8 = px.q8;
  const size_t b0 = col0 / kMxfp4I8Block;
  ctx.kernels().quantize_row_q8(x, n, const_cast<int8_t*>(q8.q) + row * q8.ldq + col0,
                                const_cast<float*>(q8.d) + row * q8.ldd + b0,
                                const_cast<int32_t*>(q8.sum) + row * q8.ldd + b0);
}

bool TakesQ8Rows(const KernelContext& ctx, const WeightMatrix& w) {
  return RowLayout(ctx.kernels().whole_x_layout[static_cast<size_t>(KindOf(w))]) == XLayout::kQ8;
}

PreparedX PrepareXParallel(KernelContext& ctx, const WeightMatrix& w, const float* x, size_t ldx,
                           const size_t* rows, size_t m, size_t k, ScratchBuffer& buf) {
  return PrepareRows(ctx, w, x, ldx, rows, m, k, buf, /*parallel=*/true);
}

GroupedX::GroupedX(KernelContext& ctx, const WeightMatrix& w, const float* x, size_t ldx,
                   const size_t* rows, const size_t* offset, size_t groups, size_t k,
                   ScratchBuffer& buf)
    : offset_(offset) {
  size_t largest = 0;
  for (size_t g = 0; g < groups; ++g) largest = std::max(largest, offset[g + 1] - offset[g]);
  const XLayout layout = WholeLayoutForM(ctx.kernels(), w, largest, /*grouped=*/true);
  if (!IsTiled(layout)) {
    px_ = PrepareRows(ctx, w, x, ldx, rows, offset[groups], k, buf, /*parallel=*/true);
    return;
  }
  // Group g's tiles are [tile_[g], tile_[g + 1]).
  const size_t tt = TileTokens(layout);
  tile_.resize(groups + 1);
  tile_[0] = 0;
  for (size_t g = 0; g < groups; ++g)
    tile_[g + 1] = tile_[g] + (offset[g + 1] - offset[g] + tt - 1) / tt;
  tile_elems_ = TileElems(layout, k);
  px_ = PackTiles(ctx, layout, k, tile_[groups], buf, /*parallel=*/true,
                  [&](size_t tile, size_t s) -> const float* {
                    // The last group starting at or before the tile: groups without rows start
                    // where the next one does, so this is the one the tile belongs to.
                    const size_t g =
                        std::upper_bound(tile_.begin(), tile_.end(), tile) - tile_.begin() - 1;
                    const size_t i = offset[g] + (tile - tile_[g]) * tt + s;
                    return i < offset[g + 1] ? x + (rows ? rows[i] : i) * ldx : nullptr;
                  });
}

GroupedX GroupedX::OfRows(const PreparedX& px, const size_t* offset) {
  if (px.panel_pairs || px.packed_f32 || px.amx_tiles) __builtin_trap();  // tiled: not groupable
  return GroupedX(px, offset);
}

PreparedX GroupedX::Group(size_t g) const {
  const size_t m = offset_[g + 1] - offset_[g];
  if (tile_.empty()) return px_.Rows(offset_[g], m);
  PreparedX v = px_;
  if (v.panel_pairs) v.panel_pairs += tile_[g] * tile_elems_;
  if (v.packed_f32) v.packed_f32 += tile_[g] * tile_elems_;
  if (v.amx_tiles) v.amx_tiles += tile_[g] * tile_elems_;
  v.m = m;
  return v;
}

size_t MatMulRowGrain(const KernelContext& ctx, const WeightMatrix& w, size_t m) {
  const size_t kind = static_cast<size_t>(KindOf(w));
  return m < kGemmMinM ? ctx.kernels().row_grain_gemv[kind] : ctx.kernels().row_grain_gemm[kind];
}

size_t MatMulRowGrainForAnyM(const KernelContext& ctx, const WeightMatrix& w) {
  const size_t kind = static_cast<size_t>(KindOf(w));
  return std::lcm(ctx.kernels().row_grain_gemv[kind], ctx.kernels().row_grain_gemm[kind]);
}

void MatMulRows(const KernelContext& ctx, const PreparedX& x, const WeightMatrix& w, size_t n0,
                size_t n1, float* y, size_t ldy, bool accumulate, WorkerScratch& scratch) {
  if (n0 >= n1 || x.m == 0) return;
  ctx.kernels().rows[static_cast<size_t>(KindOf(w))](x, w, n0, n1, y, ldy, accumulate, scratch);
}

void MatMul(const float* x, size_t ldx, size_t m, const WeightMatrix& w, float* y, size_t ldy,
            KernelContext& ctx, bool accumulate) {
  CheckShapes(x, ldx, m, w, y, ldy);
  if (m == 0 || w.rows == 0) return;
  if (w.cols == 0) {
    if (!accumulate)
      for (size_t t = 0; t < m; ++t) std::fill(y + t * ldy, y + t * ldy + w.rows, 0.0f);
    return;
  }
  const PreparedX px = PrepareRows(ctx, w, x, ldx, nullptr, m, w.cols, ctx.call().x,
                                   /*parallel=*/m >= kGemmMinM, /*whole=*/true);
  ForEachGemmItem(ctx, px, w, w.rows, MatMulRowGrain(ctx, w, m),
                  [&](const PreparedX& xs, size_t t0, size_t n0, size_t n1, size_t thread) {
                    MatMulRows(ctx, xs, w, n0, n1, y + t0 * ldy, ldy, accumulate,
                               ctx.worker(thread));
                  });
}

void MatMulSharedX(const float* x, size_t ldx, size_t m, std::span<const MatMulOutput> outs,
                   KernelContext& ctx) {
  if (outs.empty()) return;
  const WeightMatrix& w0 = *outs[0].w;
  bool same = true;
  for (const MatMulOutput& o : outs) {
    CheckShapes(x, ldx, m, *o.w, o.y, o.ldy);
    // (col0: an FP8 view's scale blocks decide whether the tile kernels, and their x, serve it.)
    same = same && o.w->format == w0.format && o.w->dtype == w0.dtype && o.w->cols == w0.cols &&
           o.w->col0 == w0.col0 && o.w->cols > 0;
  }
  if (!same || m == 0) {  // x is prepared per weight format: one MatMul each
    for (const MatMulOutput& o : outs) MatMul(x, ldx, m, *o.w, o.y, o.ldy, ctx);
    return;
  }
  const PreparedX px = PrepareRows(ctx, w0, x, ldx, nullptr, m, w0.cols, ctx.call().x,
                                   /*parallel=*/m >= kGemmMinM, /*whole=*/true);
  // The weights' rows back to back, each padded to the row grain so that every range a thread
  // gets starts on a grain boundary of its weight.
  const size_t grain = MatMulRowGrain(ctx, w0, m);
  std::vector<size_t> offset(outs.size() + 1, 0);
  for (size_t i = 0; i < outs.size(); ++i)
    offset[i + 1] = offset[i] + (outs[i].w->rows + grain - 1) / grain * grain;
  ForEachGemmItem(
      ctx, px, w0, offset.back(), grain,
      [&](const PreparedX& xs, size_t t0, size_t n0, size_t n1, size_t thread) {
        for (size_t i = 0; i < outs.size(); ++i) {
          const size_t lo = offset[i], b = std::max(n0, lo), e = std::min(n1, lo + outs[i].w->rows);
          if (b < e)
            MatMulRows(ctx, xs, *outs[i].w, b - lo, e - lo, outs[i].y + t0 * outs[i].ldy,
                       outs[i].ldy, false, ctx.worker(thread));
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

}  // namespace moeserve::kernels
