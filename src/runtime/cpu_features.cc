#include "runtime/cpu_features.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace moeserve {
namespace {

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
  __cpuid_count(7, 1, a, b, c, d);
  f.avx512_bf16 = zmm_ok && (a & (1u << 5));
#endif
  return f;
}

}  // namespace

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

Isa BestIsa() {
  const CpuFeatures& f = GetCpuFeatures();
  Isa best = Isa::kScalar;
  if (f.avx2 && f.fma && f.f16c) best = Isa::kAvx2;
  if (best == Isa::kAvx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq)
    best = Isa::kAvx512;
  if (best == Isa::kAvx512 && f.avx512_bf16) best = Isa::kAvx512Bf16;
  if (const char* cap = std::getenv("MOESERVE_ISA")) {
    Isa limit = best;
    if (!std::strcmp(cap, "scalar")) limit = Isa::kScalar;
    if (!std::strcmp(cap, "avx2")) limit = Isa::kAvx2;
    if (!std::strcmp(cap, "avx512")) limit = Isa::kAvx512;
    if (!std::strcmp(cap, "avx512bf16")) limit = Isa::kAvx512Bf16;
    if (limit < best) best = limit;
  }
  return best;
}

std::string IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Bf16: return "avx512bf16";
  }
  return "?";
}

}  // namespace moeserve
