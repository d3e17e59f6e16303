// NeoX RoPE. cos/sin are computed once per (token, frequency) and applied to every head; values
// match the reference bit for bit (same f32 formulas).
#include "kernels/rope.h"

#include <cmath>
#include <vector>

#include "core/check.h"

namespace moeserve::kernels {
namespace {

// HF: inv_freq = 1 / theta ** (arange(0, r, 2).float() / r). The exponent is f32 as in HF; pow
// (and cos/sin below) are evaluated in f64 and rounded once, so the result is the correctly
// rounded f32 on every platform (libm and torch f32 transcendentals differ by an ulp at some
// arguments, which flips bf16-rounded K elements downstream).
float InvFreq(size_t j, size_t rotary_dim, float theta) {
  const float exponent = static_cast<float>(2 * j) / static_cast<float>(rotary_dim);
  return static_cast<float>(1.0 /
                            std::pow(static_cast<double>(theta), static_cast<double>(exponent)));
}
float Cos(float angle) {
  return static_cast<float>(std::cos(static_cast<double>(angle)));
}
float Sin(float angle) {
  return static_cast<float>(std::sin(static_cast<double>(angle)));
}

void Check(size_t head_dim, size_t rotary_dim) {
  MOESERVE_CHECK(rotary_dim % 2 == 0 && rotary_dim <= head_dim, "rotary_dim ", rotary_dim,
                 " head_dim ", head_dim);
}

}  // namespace

void RopeNeox(float* x, size_t ld, size_t num_tokens, size_t num_heads, size_t head_dim,
              size_t rotary_dim, const int32_t* positions, float theta) {
  Check(head_dim, rotary_dim);
  const size_t half = rotary_dim / 2;
  thread_local std::vector<float> inv_freq, cs;
  inv_freq.resize(half);
  cs.resize(2 * half);
  for (size_t j = 0; j < half; ++j) inv_freq[j] = InvFreq(j, rotary_dim, theta);
  for (size_t t = 0; t < num_tokens; ++t) {
    const float pos = static_cast<float>(positions[t]);
    for (size_t j = 0; j < half; ++j) {
      const float angle = pos * inv_freq[j];
      cs[j] = Cos(angle);
      cs[half + j] = Sin(angle);
    }
    for (size_t h = 0; h < num_heads; ++h) {
      float* v = x + t * ld + h * head_dim;
      for (size_t j = 0; j < half; ++j) {
        const float a = v[j], b = v[j + half], c = cs[j], s = cs[half + j];
        v[j] = a * c - b * s;
        v[j + half] = b * c + a * s;
      }
    }
  }
}

void RopeNeoxReference(float* x, size_t ld, size_t num_tokens, size_t num_heads, size_t head_dim,
                       size_t rotary_dim, const int32_t* positions, float theta) {
  Check(head_dim, rotary_dim);
  const size_t half = rotary_dim / 2;
  for (size_t t = 0; t < num_tokens; ++t) {
    for (size_t h = 0; h < num_heads; ++h) {
      float* v = x + t * ld + h * head_dim;
      for (size_t j = 0; j < half; ++j) {
        const float angle = static_cast<float>(positions[t]) * InvFreq(j, rotary_dim, theta);
        const float c = Cos(angle), s = Sin(angle);
        const float a = v[j], b = v[j + half];
        v[j] = a * c - b * s;
        v[j + half] = b * c + a * s;
      }
    }
  }
}

}  // namespace moeserve::kernels
