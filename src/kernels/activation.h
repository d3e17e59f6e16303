// Elementwise activations.
#pragma once

#include <cstddef>

#include "kernels/context.h"

namespace moeserve::kernels {

// out[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + e^-x), f32, with the context's ISA, on the
// calling thread. out may alias gate or up.
void SiluMul(const KernelContext& ctx, const float* gate, const float* up, float* out, size_t n);
void SiluMulReference(const float* gate, const float* up, float* out, size_t n);

}  // namespace moeserve::kernels
