// Elementwise activations.
#pragma once

#include <cstddef>

namespace moeserve::kernels {

// out[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + e^-x), f32. out may alias gate or up.
void SiluMul(const float* gate, const float* up, float* out, size_t n);
void SiluMulReference(const float* gate, const float* up, float* out, size_t n);

}  // namespace moeserve::kernels
