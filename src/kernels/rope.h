// Rotary position embedding, NeoX (rotate-half) layout, optionally partial.
#pragma once

#include <cstddef>
#include <cstdint>

namespace moeserve::kernels {

// In place on x [num_tokens, ld]: head h of token t is x + t*ld + h*head_dim. Within each head,
// dims j < rotary_dim/2 pair with j + rotary_dim/2:
//   x'[j]      = x[j]·cos − x[j+r/2]·sin
//   x'[j+r/2]  = x[j+r/2]·cos + x[j]·sin,   angle = positions[t] · theta^(−2j/r)
// dims rotary_dim..head_dim-1 pass through. inv_freq and the angle are computed in f32 as HF does
// (inv_freq = 1 / theta^(arange(0, r, 2) / r); angle = float(pos) * inv_freq).
void RopeNeox(float* x, size_t ld, size_t num_tokens, size_t num_heads, size_t head_dim,
              size_t rotary_dim, const int32_t* positions, float theta);

void RopeNeoxReference(float* x, size_t ld, size_t num_tokens, size_t num_heads, size_t head_dim,
                       size_t rotary_dim, const int32_t* positions, float theta);

}  // namespace moeserve::kernels
