// What the CPU we run on can do, read once with cpuid. Kernels pick their implementation from it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace moeserve {

// Ordered: each ISA's kernels may use everything below it. kAvx512 is AVX-512 F / BW / VL / DQ with
// VNNI (Cascade Lake, Ice Lake); kAvx512Bf16 adds AVX512_BF16; kAmx is kAvx512Bf16 plus the AMX
// tile unit (AMX-TILE and AMX-BF16, Sapphire Rapids and later) for the bf16 GEMMs, and AVX-512 VBMI
// (on every AMX core) for the FP8 GEMV's byte-table decode.
enum class Isa { kScalar, kAvx2, kAvx512, kAvx512Bf16, kAmx };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, avx512_vnni = false, avx512_vbmi = false;
  bool gfni = false;  // GF2P8AFFINEQB and friends, on 512-bit vectors (the OS saves zmm state)
  // The CPU has AMX-TILE, AMX-BF16 and AMX-INT8 (every AMX CPU so far has all three) and the OS
  // saves the tile state (XCR0 bits 17, 18), and Linux granted this process the tile data
  // (arch_prctl ARCH_REQ_XCOMP_PERM, asked once here): without the grant the first tile
  // instruction faults.
  bool amx_bf16 = false;
};

const CpuFeatures& GetCpuFeatures();
// The best ISA both the CPU and this build support, before any cap.
Isa MachineIsa();
// The ISA the kernels run: MachineIsa() capped by MOESERVE_ISA=scalar|avx2|avx512|avx512bf16|amx
// (read once, at the first call) and by the innermost live ScopedIsaCap. Kernels do not ask it per
// call: a kernels::KernelContext resolves it once.
Isa BestIsa();
std::string IsaName(Isa isa);
// "avx2" -> kAvx2; nullopt for a name that is none of IsaName's.
std::optional<Isa> ParseIsaName(std::string_view name);

// Caps BestIsa() for its lifetime, process-wide, so tests and benchmarks run every path the
// machine has in one process. A kernel context made while it lives gets the capped ISA; contexts
// made before keep theirs.
class ScopedIsaCap {
 public:
  explicit ScopedIsaCap(Isa cap);
  ~ScopedIsaCap();
  ScopedIsaCap(const ScopedIsaCap&) = delete;
  ScopedIsaCap& operator=(const ScopedIsaCap&) = delete;

 private:
  int previous_;
};

}  // namespace moeserve
