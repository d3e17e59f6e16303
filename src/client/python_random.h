// Python's random.Random, bit for bit: the MT19937 generator seeded the way CPython seeds it from
// an int, getrandbits, _randbelow and sample(). lm-eval draws few-shot examples with
// random.Random(1234).sample(docs, k), one call per evaluated document, so reproducing it here is
// what makes `moeserve eval gsm8k` show the model the same shots lm-eval does.
//
// Not thread-safe: one generator per thread of use.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace moeserve::client {

class PythonRandom {
 public:
  // random.Random(seed) for a non-negative int seed (CPython uses abs(seed) as the key).
  explicit PythonRandom(uint64_t seed);

  // random.getrandbits(k) for 0 <= k <= 64.
  uint64_t GetRandBits(int k);
  // random._randbelow(n) for n >= 1: rejection sampling over bit_length(n) bits.
  uint64_t RandBelow(uint64_t n);
  // random.random(): a double in [0, 1) with 53 random bits.
  double Random();
  // random.sample(range(n), k): k distinct indices in [0, n), in the order Python returns them.
  std::vector<size_t> Sample(size_t n, size_t k);

 private:
  uint32_t NextU32();
  void InitGenrand(uint32_t s);

  static constexpr int kN = 624;
  std::array<uint32_t, kN> mt_{};
  int index_ = kN;
};

}  // namespace moeserve::client
