#include "client/python_random.h"

#include <cmath>
#include <unordered_set>

#include "core/check.h"

namespace moeserve::client {

void PythonRandom::InitGenrand(uint32_t s) {
  mt_[0] = s;
  for (int i = 1; i < kN; ++i)
    mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  index_ = kN;
}

// CPython's random_seed: the key is abs(seed) split into 32-bit words, least significant first,
// at least one word (seed 0 gives the key [0]), fed to MT19937's init_by_array.
PythonRandom::PythonRandom(uint64_t seed) {
  std::vector<uint32_t> key{static_cast<uint32_t>(seed)};
  if (seed >> 32) key.push_back(static_cast<uint32_t>(seed >> 32));
  InitGenrand(19650218u);
  int i = 1;
  size_t j = 0;
  for (int k = std::max<int>(kN, static_cast<int>(key.size())); k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] +
             static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= key.size()) j = 0;
  }
  for (int k = kN - 1; k > 0; --k) {
    mt_[i] =
        (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000u;  // guarantees a non-zero state
  index_ = kN;
}

uint32_t PythonRandom::NextU32() {
  constexpr uint32_t kUpper = 0x80000000u, kLower = 0x7fffffffu, kMatrixA = 0x9908b0dfu;
  if (index_ >= kN) {
    for (int k = 0; k < kN; ++k) {
      const uint32_t y = (mt_[k] & kUpper) | (mt_[(k + 1) % kN] & kLower);
      mt_[k] = mt_[(k + 397) % kN] ^ (y >> 1) ^ ((y & 1u) ? kMatrixA : 0u);
    }
    index_ = 0;
  }
  uint32_t y = mt_[index_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

// CPython fills the result 32 bits at a time from the least significant word up; the last
// (most significant) word keeps the top bits of its draw.
uint64_t PythonRandom::GetRandBits(int k) {
  MOESERVE_CHECK(k >= 0 && k <= 64, "k=", k);
  if (k == 0) return 0;
  if (k <= 32) return NextU32() >> (32 - k);
  const uint64_t low = NextU32();
  const uint64_t high = NextU32() >> (64 - k);
  return low | (high << 32);
}

uint64_t PythonRandom::RandBelow(uint64_t n) {
  MOESERVE_CHECK(n >= 1, "RandBelow(0)");
  const int bits = 64 - __builtin_clzll(n);  // n.bit_length()
  uint64_t r = GetRandBits(bits);
  while (r >= n) r = GetRandBits(bits);
  return r;
}

double PythonRandom::Random() {
  const uint32_t a = NextU32() >> 5, b = NextU32() >> 6;
  return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

// random.sample: a partial Fisher-Yates over a copied pool when the population is small next to
// the set a rejection sampler would need, rejection sampling with a set of taken indices otherwise.
// The threshold is CPython's (setsize = 21, plus 4 ** ceil(log(3k, 4)) when k > 5) because the two
// branches consume the generator differently.
std::vector<size_t> PythonRandom::Sample(size_t n, size_t k) {
  if (k > n) Fail("sample larger than population: k=", k, " n=", n);
  std::vector<size_t> result(k);
  size_t setsize = 21;
  if (k > 5)
    setsize += static_cast<size_t>(std::pow(4.0, std::ceil(std::log(k * 3.0) / std::log(4.0))));
  if (n <= setsize) {
    std::vector<size_t> pool(n);
    for (size_t i = 0; i < n; ++i) pool[i] = i;
    for (size_t i = 0; i < k; ++i) {
      const size_t j = RandBelow(n - i);
      result[i] = pool[j];
      pool[j] = pool[n - i - 1];
    }
  } else {
    std::unordered_set<size_t> selected;
    for (size_t i = 0; i < k; ++i) {
      size_t j = RandBelow(n);
      while (selected.count(j)) j = RandBelow(n);
      selected.insert(j);
      result[i] = j;
    }
  }
  return result;
}

}  // namespace moeserve::client
