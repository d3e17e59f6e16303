// What the CPU we run on can do, read once with cpuid. Kernels pick their implementation from it.
#pragma once

#include <string>

namespace moeserve {

enum class Isa { kScalar, kAvx2, kAvx512, kAvx512Bf16 };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, avx512_vnni = false;
};

const CpuFeatures& GetCpuFeatures();
// The best ISA both the CPU and this build support; MOESERVE_ISA=scalar|avx2|avx512|avx512bf16
// caps it (for testing every path on one machine).
Isa BestIsa();
std::string IsaName(Isa isa);

}  // namespace moeserve
