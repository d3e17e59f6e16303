// The AMX tile unit as the AMX translation units use it (include only from TUs built with the AMX
// flags): the tile instructions with honest memory clobbers, and the one tile shape they all use.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/internal.h"

// The tile instructions, with a "memory" clobber: GCC's intrinsics (amxtileintrin.h) declare no
// memory operands, so nothing stops the compiler moving the stores that fill a B tile's scratch
// after the tileloadd that reads it, or the loads of a stored C before the tilestored.
#define MOESERVE_TILE_LOAD(tmm, base, stride)                                                    \
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #tmm ::"r"(base), "r"(static_cast<long>(stride)) \
                   : "memory")
#define MOESERVE_TILE_STORE(tmm, base, stride)                        \
  __asm__ volatile("tilestored %%tmm" #tmm ", (%0,%1,1)" ::"r"(base), \
                   "r"(static_cast<long>(stride))                     \
                   : "memory")
// The same with the tile number a constant expression (a template argument).
#define MOESERVE_TILE_STORE_N(tmm, base, stride)                                                 \
  __asm__ volatile("tilestored %%tmm%c2, (%0,%1,1)" ::"r"(base), "r"(static_cast<long>(stride)), \
                   "i"(tmm)                                                                      \
                   : "memory")
#define MOESERVE_TILE_ZERO(tmm) __asm__ volatile("tilezero %%tmm" #tmm ::: "memory")
// c += a · b (AT&T operand order: b, a, c).
#define MOESERVE_TILE_DP(c, a, b) \
  __asm__ volatile("tdpbf16ps %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::: "memory")
// The same with the tile numbers constant expressions (template arguments).
#define MOESERVE_TILE_DP_N(c, a, b) \
  __asm__ volatile("tdpbf16ps %%tmm%c0, %%tmm%c1, %%tmm%c2" ::"i"(b), "i"(a), "i"(c) : "memory")

#define MOESERVE_TILE_LOAD_N(tmm, base, stride)                                                 \
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm%c2" ::"r"(base), "r"(static_cast<long>(stride)), \
                   "i"(tmm)                                                                     \
                   : "memory")
#define MOESERVE_TILE_ZERO_N(tmm) __asm__ volatile("tilezero %%tmm%c0" ::"i"(tmm) : "memory")
// c += a · b over signed int8 bytes into int32 (AMX-INT8), tile numbers constant expressions.
#define MOESERVE_TILE_DPBSSD_N(c, a, b) \
  __asm__ volatile("tdpbssd %%tmm%c0, %%tmm%c1, %%tmm%c2" ::"i"(b), "i"(a), "i"(c) : "memory")

namespace moeserve::kernels::amx {

// The geometry every AMX kernel shares: a tile step covers 16 column pairs (32 columns), a 1 KiB
// tile is 256 uint32, x's A tiles are laid out per 16 tokens as [steps][16 tokens][16 pairs].
inline constexpr size_t kStepPairs = 16;
inline constexpr size_t kTileWords = 256;

// Tile steps over k columns.
inline size_t TileSteps(size_t k) {
  return ((k + 1) / 2 + kStepPairs - 1) / kStepPairs;
}

// The tile shapes (palette 1): rows and bytes per row of each tile.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Loads the shapes on the calling thread; a kernel calls it on entry and _tile_release() on return
// (a thread holding tile data makes every context switch save 8 KiB).
inline void LoadTileConfig(const TileConfig& config) {
  // Not _tile_loadconfig: GCC 12 declares its operand as the first 8 bytes only, and then drops
  // the stores of the shapes as dead.
  __asm__ volatile("ldtilecfg %0" ::"m"(config) : "memory");
}

// The shapes most kernels use: all eight tiles 16 rows × 64 bytes; with `token_rows` < 16, tiles
// 0-5 (C and A: a row per token) only that many rows, for calls with fewer tokens than a tile.
inline void ConfigureTiles(size_t token_rows = 16) {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = static_cast<uint8_t>(t < 6 && token_rows < 16 ? token_rows : 16);
  }
  LoadTileConfig(config);
}

}  // namespace moeserve::kernels::amx
