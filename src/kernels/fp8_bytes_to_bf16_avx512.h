// e4m3 codes of a 16-row FP8 panel (fp8_panels.h) decoded to exact bf16 pairs (AVX-512 BW, VBMI
// and GFNI: include only from TUs built with those; the bf16 pairs are plain integer vectors, no
// BF16 instruction is used): by byte tables (Decoder), or for weights by two GF(2)-affine byte
// maps with the tables patching zero and subnormal codes (AffineDecoder). AffineDecoder serves the
// amx FP8 GEMV (matmul_fp8_panels_amx.cc), the tile GEMM's per-step decode (matmul_quant_amx.cc)
// and the avx512 FP8 GEMV on VBMI / GFNI cores (matmul_fp8_panels_avx512_gfni.cc);
// RowDecoder, the tables in a row's own order, the amx attention tile's FP8 K / V rows
// (attention_amx.cc).
#pragma once

#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/fp8_panels.h"

namespace moeserve::kernels::amx {

inline constexpr size_t kGroupCols = 4;  // columns per 64-byte load of a panel

// The bf16 bits of e4m3 magnitude m (code & 0x7f; 0x7f is NaN, never repacked): low bytes, then
// high bytes, 128 each.
struct DecodeTables {
  alignas(64) std::array<uint8_t, 128> lo, hi;
};

inline DecodeTables MakeTables() {
  DecodeTables t{};
  for (int m = 0; m < 128; ++m) {
    const int e = m >> 3, f = m & 7;
    // e4m3: exponent bias 7, subnormals at e == 0 (f / 8 · 2^-6).
    const float v =
        e == 0 ? static_cast<float>(f) / 8.0f / 64.0f
               : (1.0f + static_cast<float>(f) / 8.0f) * static_cast<float>(1 << e) / 128.0f;
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    const auto b = static_cast<uint16_t>(bits >> 16);  // exact: 3 mantissa bits
    t.lo[m] = static_cast<uint8_t>(b & 0xff);
    t.hi[m] = static_cast<uint8_t>(b >> 8);
  }
  return t;
}

inline const DecodeTables& Tables() {
  static const DecodeTables t = MakeTables();
  return t;
}

// The constants of the decode, in registers for a whole call.
struct Decoder {
  __m512i lo0, lo1, hi0, hi1;  // the tables: entries 0..63 and 64..127
  __m512i order;               // the byte order vpunpck{l,h}bw needs (below)
  __m512i sign;                // 0x80 in every byte

  Decoder() {
    // vpunpcklbw(lo, hi) makes word n of 128-bit lane L from byte 16L + n (n < 8), vpunpckhbw
    // from byte 16L + 8 + n; dword j of lane L is output row 4L + j. So byte 16L + 2j + e of the
    // reordered codes is W[4L + j, c + e] (panel byte 16e + 4L + j), and byte 16L + 8 + 2j + e is
    // W[4L + j, c + 2 + e] (panel byte 16 (2 + e) + 4L + j).
    alignas(64) uint8_t idx[64];
    for (int lane = 0; lane < 4; ++lane)
      for (int j = 0; j < 4; ++j)
        for (int e = 0; e < 2; ++e) {
          idx[16 * lane + 2 * j + e] = static_cast<uint8_t>(16 * e + 4 * lane + j);
          idx[16 * lane + 8 + 2 * j + e] = static_cast<uint8_t>(16 * (2 + e) + 4 * lane + j);
        }
    Load(idx);
  }

 protected:
  // The tables, the given byte order and the sign mask into registers.
  void Load(const uint8_t idx[64]) {
    const DecodeTables& t = Tables();
    lo0 = _mm512_load_si512(t.lo.data());
    lo1 = _mm512_load_si512(t.lo.data() + 64);
    hi0 = _mm512_load_si512(t.hi.data());
    hi1 = _mm512_load_si512(t.hi.data() + 64);
    order = _mm512_loadu_si512(idx);
    sign = _mm512_set1_epi8(static_cast<char>(0x80));
  }
  struct NoTables {};
  explicit Decoder(NoTables) {}

 public:
  // 64 codes (columns c .. c + 3 of a panel) → two vectors of bf16 pairs: columns (c, c + 1) and
  // (c + 2, c + 3), lane r = row r. One vpermb, two vpermt2b (three uops each on these cores,
  // which is why the interleave is two one-uop unpacks on reordered codes, not two more vpermt2b).
  [[gnu::always_inline]] inline void Decode(__m512i codes, __m512bh& w01, __m512bh& w23) const {
    codes = _mm512_permutexvar_epi8(order, codes);
    const __m512i lo = _mm512_permutex2var_epi8(lo0, codes, lo1);
    // hi | (codes & 0x80): ternary-logic table A | (B & C).
    const __m512i hi =
        _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(hi0, codes, hi1), codes, sign, 0xF8);
    w01 = (__m512bh)_mm512_unpacklo_epi8(lo, hi);
    w23 = (__m512bh)_mm512_unpackhi_epi8(lo, hi);
  }
};

// The same decode for weights, in 7 instructions instead of 10 where no code of the 64 has
// exponent field 0 (zero and subnormals), the rest patched by Decoder's tables: 1.32x Decoder's
// rate with two vdpbf16ps per 64 codes (a microbenchmark from L1), 0.93x when every vector holds
// one. A weight's codes rarely do: e = 0 means |w| < 2^-6 of its block's scale unit, 448 units
// per block's largest weight (0.69% of the bench FP8 checkpoint's 64-code groups hold one). An
// FP8 KV cache's rows hold many (a fifth of a unit-scale cache's values): the attention tile
// keeps the tables (RowDecoder).
//
// For e ≠ 0 the bf16 bits of an e4m3 code s eeee fff (exponent e + 120, mantissa fff0000) are
// bit permutations of the code but for one: low byte = e0 fff 0000, high byte = s e3 ~e3 ~e3 ~e3
// ~e3 e2 e1 ((e + 120) >> 1: 0x3C | e2 e1 below 8, 0x40 | e2 e1 from 8), so each byte is one
// GF(2)-affine map of the code (vgf2p8affineqb: a bit matrix and an xor constant, 0x3C).
struct AffineDecoder : Decoder {
  __m512i lo_bits, hi_bits;  // the two bit matrices (one per 64-bit lane, replicated)
  __m512i exponent;          // 0x78 in every byte

  AffineDecoder() {
    // Output bit i of a byte is source bit src[i] (none: -1); row i of the matrix is byte 7 - i.
    auto matrix = [](const int(&src)[8]) {
      uint64_t m = 0;
      for (int i = 0; i < 8; ++i)
        if (src[i] >= 0) m |= uint64_t{1} << (8 * (7 - i) + src[i]);
      return _mm512_set1_epi64(static_cast<long long>(m));
    };
    lo_bits = matrix({-1, -1, -1, -1, 0, 1, 2, 3});
    hi_bits = matrix({4, 5, 6, 6, 6, 6, 6, 7});  // bits 2-5: e3, inverted by the constant 0x3C
    exponent = _mm512_set1_epi8(0x78);
  }

  [[gnu::always_inline]] inline void Decode(__m512i codes, __m512bh& w01, __m512bh& w23) const {
    codes = _mm512_permutexvar_epi8(order, codes);
    __m512i lo = _mm512_gf2p8affine_epi64_epi8(codes, lo_bits, 0);
    __m512i hi = _mm512_gf2p8affine_epi64_epi8(codes, hi_bits, 0x3C);
    const __mmask64 low_exponent = _mm512_testn_epi8_mask(codes, exponent);
    if (__builtin_expect(low_exponent != 0, 0)) {
      // Codes with e = 0 index the tables' first 8 entries by their low 6 bits (0-7: fff).
      lo = _mm512_mask_permutexvar_epi8(lo, low_exponent, codes, lo0);
      const __m512i table_hi =
          _mm512_ternarylogic_epi32(_mm512_permutexvar_epi8(codes, hi0), codes, sign, 0xF8);
      hi = _mm512_mask_blend_epi8(low_exponent, hi, table_hi);
    }
    w01 = (__m512bh)_mm512_unpacklo_epi8(lo, hi);
    w23 = (__m512bh)_mm512_unpackhi_epi8(lo, hi);
  }
};

// The same decode for 64 consecutive codes of one row (an FP8 cache's K or V row): Decode's two
// outputs are the row's values 0-31 and 32-63 in order. Byte 16L + n of the reordered codes (n < 8)
// becomes word n of lane L of the first output, value 8L + n; byte 16L + 8 + n word n of lane L of
// the second, value 32 + 8L + n.
struct RowDecoder : Decoder {
  RowDecoder() : Decoder(NoTables{}) {
    alignas(64) uint8_t idx[64];
    for (int lane = 0; lane < 4; ++lane)
      for (int n = 0; n < 8; ++n) {
        idx[16 * lane + n] = static_cast<uint8_t>(8 * lane + n);
        idx[16 * lane + 8 + n] = static_cast<uint8_t>(32 + 8 * lane + n);
      }
    Load(idx);
  }

  // Row codes[0, d) → out[0, d) as bf16 bits (d a multiple of 32).
  [[gnu::always_inline]] inline void Row(const uint8_t* codes, size_t d, uint16_t* out) const {
    size_t j = 0;
    for (; j + 64 <= d; j += 64) {
      __m512bh a, b;
      Decode(_mm512_loadu_si512(codes + j), a, b);
      _mm512_storeu_si512(out + j, (__m512i)a);
      _mm512_storeu_si512(out + j + 32, (__m512i)b);
    }
    if (j < d) {  // 32 codes left: the first output holds them
      __m512bh a, b;
      Decode(_mm512_maskz_loadu_epi8(0xffffffffull, codes + j), a, b);
      _mm512_storeu_si512(out + j, (__m512i)a);
    }
  }
};

// Panel p's 64 codes at column c; a group cut by k reads only its columns (the rest zero).
[[gnu::always_inline]] inline __m512i LoadGroup(const uint8_t* panel, size_t c, size_t k) {
  if (c + kGroupCols <= k) return _mm512_loadu_si512(panel + c * kFp8PanelRows);
  const __mmask64 mask = (__mmask64{1} << ((k - c) * kFp8PanelRows)) - 1;
  return _mm512_maskz_loadu_epi8(mask, panel + c * kFp8PanelRows);
}

// Tile step `st` (columns 32 st .. 32 st + 31) of a panel of k columns as one B tile: pair i of
// the step as 16 uint32 at out + 16 i (row r: W[r, c] | W[r, c + 1] << 16, unscaled), pairs past
// k zero. out: 64-byte aligned.
[[gnu::always_inline]] inline void DecodeStep(const AffineDecoder& d, const uint8_t* panel,
                                              size_t st, size_t k, uint32_t* out) {
  for (size_t g = 0; g < 8; ++g) {
    const size_t c = 32 * st + kGroupCols * g;
    __m512bh w01, w23;
    if (c < k) {
      d.Decode(LoadGroup(panel, c, k), w01, w23);
    } else {
      w01 = w23 = (__m512bh)_mm512_setzero_si512();
    }
    _mm512_store_si512(out + 32 * g, (__m512i)w01);
    _mm512_store_si512(out + 32 * g + 16, (__m512i)w23);
  }
}

}  // namespace moeserve::kernels::amx
