#include "runtime/cpu_features.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "core/log.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace moeserve {
namespace {

// Linux hands out the AMX tile data state (8 KiB of registers per thread) only on request, once
// per process (all its threads, present and future); false where the kernel refuses or is older
// than 5.16.
bool RequestTileData() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

CpuFeatures Detect() {
  CpuFeatures f;
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.fma = c & (1u << 12);
  f.f16c = c & (1u << 29);
  const bool osxsave = c & (1u << 27);
  if (!osxsave) return f;
  unsigned xlo, xhi;
  __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  const bool ymm_ok = (xlo & 0x6) == 0x6, zmm_ok = (xlo & 0xe6) == 0xe6;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = ymm_ok && (b & (1u << 5));
  f.avx512f = zmm_ok && (b & (1u << 16));
  f.avx512dq = zmm_ok && (b & (1u << 17));
  f.avx512bw = zmm_ok && (b & (1u << 30));
  f.avx512vl = zmm_ok && (b & (1u << 31));
  f.avx512_vnni = zmm_ok && (c & (1u << 11));
  f.avx512_vbmi = zmm_ok && (c & (1u << 1));
  f.gfni = zmm_ok && (c & (1u << 8));
  const bool amx_tile = d & (1u << 24), amx_bf16 = d & (1u << 22), amx_int8 = d & (1u << 25);
  __cpuid_count(7, 1, a, b, c, d);
  f.avx512_bf16 = zmm_ok && (a & (1u << 5));
  const bool tiles_ok = (xlo & (3u << 17)) == (3u << 17);  // XTILECFG and XTILEDATA
  f.amx_bf16 = amx_tile && amx_bf16 && amx_int8 && tiles_ok && RequestTileData();
#endif
  return f;
}

}  // namespace

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

Isa MachineIsa() {
  static const Isa machine = [] {
    const CpuFeatures& f = GetCpuFeatures();
    Isa best = Isa::kScalar;
    if (f.avx2 && f.fma && f.f16c) best = Isa::kAvx2;
    // The kAvx512 kernels use VNNI (vpdpbusd): Cascade Lake, Ice Lake and every later AVX-512
    // core have it; Skylake-SP, without it, runs the AVX2 kernels.
    if (best == Isa::kAvx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512_vnni)
      best = Isa::kAvx512;
    // Every CPU with AVX512_BF16 (Cooper Lake, Sapphire Rapids, Zen 4 and later) has AVX512_VNNI
    // too.
    if (best == Isa::kAvx512 && f.avx512_bf16) best = Isa::kAvx512Bf16;
    // Every AMX CPU so far has VBMI and GFNI too; the kAmx FP8 decoders use both.
    if (best == Isa::kAvx512Bf16 && f.amx_bf16 && f.avx512_vbmi && f.gfni) best = Isa::kAmx;
    return best;
  }();
  return machine;
}

namespace {
// MachineIsa() capped by MOESERVE_ISA, resolved once.
Isa EnvironmentIsa() {
  static const Isa isa = [] {
    const Isa machine = MachineIsa();
    const char* cap = std::getenv("MOESERVE_ISA");
    if (!cap || !*cap) return machine;
    const std::optional<Isa> limit = ParseIsaName(cap);
    if (!limit) {
      LogWarn("MOESERVE_ISA=", cap,
              " is not one of scalar, avx2, avx512, avx512bf16, amx: ignored");
      return machine;
    }
    return std::min(*limit, machine);
  }();
  return isa;
}

// The innermost ScopedIsaCap's ISA, or -1.
std::atomic<int> g_scoped_cap{-1};
}  // namespace

Isa BestIsa() {
  const Isa isa = EnvironmentIsa();
  const int cap = g_scoped_cap.load(std::memory_order_relaxed);
  return cap >= 0 ? std::min(isa, static_cast<Isa>(cap)) : isa;
}

ScopedIsaCap::ScopedIsaCap(Isa cap)
    : previous_(g_scoped_cap.exchange(static_cast<int>(cap), std::memory_order_relaxed)) {}

ScopedIsaCap::~ScopedIsaCap() {
  g_scoped_cap.store(previous_, std::memory_order_relaxed);
}

std::optional<Isa> ParseIsaName(std::string_view name) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx})
    if (name == IsaName(isa)) return isa;
  return std::nullopt;
}

std::string IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx512Bf16:
      return "avx512bf16";
    case Isa::kAmx:
      return "amx";
  }
  return "?";
}

}  // namespace moeserve
