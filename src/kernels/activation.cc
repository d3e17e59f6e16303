#include "kernels/activation.h"

#include <cmath>

#include "kernels/isa_kernels.h"

namespace moeserve::kernels {

void SiluMul(const KernelContext& ctx, const float* gate, const float* up, float* out, size_t n) {
  ctx.kernels().silu_mul(gate, up, out, n);
}

void SiluMulReference(const float* gate, const float* up, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace moeserve::kernels
