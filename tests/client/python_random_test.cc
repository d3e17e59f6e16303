#include "client/python_random.h"

#include <gtest/gtest.h>

#include "core/check.h"
#include "test_util.h"

namespace moeserve::client {
namespace {

// Computed once with CPython 3.11: r = random.Random(1234); [r.sample(range(7473), 5) for _ in
// range(3)] -- the shot indices lm-eval's gsm8k uses for the first three test questions.
TEST(PythonRandom, LmEvalGsm8kShotsForSeed1234) {
  PythonRandom r(1234);
  EXPECT_EQ(r.Sample(7473, 5), (std::vector<size_t>{6374, 3610, 957, 61, 742}));
  EXPECT_EQ(r.Sample(7473, 5), (std::vector<size_t>{7462, 6610, 4769, 286, 5501}));
  EXPECT_EQ(r.Sample(7473, 5), (std::vector<size_t>{5677, 687, 806, 6279, 2905}));
}

// r = random.Random(0): sample(range(10), 10), sample(range(30), 7), getrandbits(40), random().
TEST(PythonRandom, SmallPopulationsAndBitsSeed0) {
  PythonRandom r(0);
  EXPECT_EQ(r.Sample(10, 10), (std::vector<size_t>{6, 9, 0, 2, 4, 3, 5, 1, 8, 7}));
  EXPECT_EQ(r.Sample(30, 7), (std::vector<size_t>{18, 28, 6, 16, 4, 9, 25}));
  EXPECT_EQ(r.GetRandBits(40), 106325369465u);
  EXPECT_DOUBLE_EQ(r.Random(), 0.6183689966753316);
}

// A seed wider than 32 bits is keyed with two words: random.Random(2**40 + 5).
TEST(PythonRandom, SeedWiderThan32Bits) {
  PythonRandom r((uint64_t{1} << 40) + 5);
  EXPECT_EQ(r.Sample(100, 3), (std::vector<size_t>{64, 66, 34}));
  const auto s = r.Sample(2000, 50);
  EXPECT_EQ(std::vector<size_t>(s.begin(), s.begin() + 6),
            (std::vector<size_t>{1359, 1896, 56, 1087, 1553, 1675}));
}

TEST(PythonRandom, RejectsSampleLargerThanPopulation) {
  PythonRandom r(1);
  EXPECT_THROW(r.Sample(3, 4), Error);
}

// Against the Python on this machine, over seeds and over sizes on both sides of sample()'s
// pool/set threshold (21 for k <= 5, 21 + 4**ceil(log4(3k)) above).
TEST(PythonRandom, MatchesSystemPython) {
  nlohmann::json cases = nlohmann::json::array();
  for (uint64_t seed :
       {0ull, 1ull, 42ull, 1234ull, 4294967295ull, 4294967296ull, 123456789012345ull})
    for (auto [n, k] : std::vector<std::pair<size_t, size_t>>{{1, 1},
                                                              {5, 5},
                                                              {21, 5},
                                                              {22, 5},
                                                              {7473, 5},
                                                              {7473, 8},
                                                              {36, 6},
                                                              {37, 6},
                                                              {100, 30},
                                                              {1000, 200},
                                                              {10, 0}})
      cases.push_back({seed, n, k, 3});
  auto ref = testing::PythonReference("random", cases);
  if (!ref) GTEST_SKIP() << "no /usr/bin/python3";
  ASSERT_EQ(ref->size(), cases.size());
  for (size_t c = 0; c < cases.size(); ++c) {
    const uint64_t seed = cases[c][0];
    const size_t n = cases[c][1], k = cases[c][2];
    SCOPED_TRACE("seed " + std::to_string(seed) + " n " + std::to_string(n) + " k " +
                 std::to_string(k));
    PythonRandom r(seed);
    for (size_t d = 0; d < 3; ++d)
      EXPECT_EQ(r.Sample(n, k), (*ref)[c]["samples"][d].get<std::vector<size_t>>());
    for (int bits = 1; bits <= 64; ++bits)
      ASSERT_EQ(std::to_string(r.GetRandBits(bits)), (*ref)[c]["bits"][bits - 1].get<std::string>())
          << bits << " bits";
    EXPECT_EQ(r.Random(), (*ref)[c]["random"].get<double>());
  }
}

}  // namespace
}  // namespace moeserve::client
