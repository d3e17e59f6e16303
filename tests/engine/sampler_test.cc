#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

namespace moeserve::engine {
namespace {

std::vector<float> RandomLogits(size_t vocab, uint64_t seed, float scale = 3.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> logits(vocab);
  for (float& x : logits) x = dist(rng);
  return logits;
}

std::vector<double> Softmax(const std::vector<float>& logits) {
  double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp(logits[i] - max);
  for (double& x : p) x /= sum;
  return p;
}

// Empirical frequencies over `draws` samples of one sequence.
std::map<int32_t, int> Draw(const std::vector<float>& logits, const SamplingParams& params,
                            int draws, uint64_t seed = 7) {
  Sampler sampler;
  SamplerState state(params, {}, seed);
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i)
    ++counts[sampler.Sample(logits.data(), logits.size(), params, state, {}, 0).token];
  return counts;
}

TEST(Sampler, GreedyIsArgmaxWithTiesToLowestId) {
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
  SamplingParams params;
  params.temperature = 0.0f;
  Sampler sampler;
  SamplerState state(params, {}, 1);
  EXPECT_EQ(sampler.Sample(logits.data(), logits.size(), params, state, {}, 0).token, 1);
  logits[3] = 2.5f;
  EXPECT_EQ(sampler.Sample(logits.data(), logits.size(), params, state, {}, 0).token, 3);
  EXPECT_EQ(ArgMax(logits.data(), logits.size()), 3);
}

TEST(Sampler, TopKOneIsExactlyGreedy) {
  Sampler sampler;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::vector<float> logits = RandomLogits(1000, seed);
    // Near-ties that a temperature division could reorder.
    logits[17] = logits[ArgMax(logits.data(), logits.size())];
    logits[5] = std::nextafter(logits[17], -1e9f);
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    SamplingParams top1;
    top1.temperature = 1.7f;
    top1.top_k = 1;
    top1.seed = seed;
    SamplerState s1(greedy, {}, seed), s2(top1, {}, seed);
    EXPECT_EQ(sampler.Sample(logits.data(), logits.size(), greedy, s1, {}, 0).token,
              sampler.Sample(logits.data(), logits.size(), top1, s2, {}, 0).token);
  }
}

TEST(Sampler, SeedReproducibleAndIndependentOfBatch) {
  const size_t vocab = 500;
  SamplingParams params;
  params.temperature = 1.0f;
  params.top_p = 0.95f;
  params.seed = 1234;
  SamplingParams other = params;
  other.seed.reset();
  other.top_k = 20;

  auto run = [&](bool interleave) {
    Sampler sampler;
    SamplerState a(params, {}, 99), b(other, {}, 5);
    std::vector<int32_t> out;
    for (int step = 0; step < 100; ++step) {
      const auto logits = RandomLogits(vocab, step);
      if (interleave) {  // another sequence in the same batch, before and after
        const auto noise = RandomLogits(vocab, 1000 + step);
        sampler.Sample(noise.data(), vocab, other, b, {}, 0);
      }
      out.push_back(sampler.Sample(logits.data(), vocab, params, a, {}, 0).token);
      if (interleave && step % 3 == 0) sampler.Sample(logits.data(), vocab, other, b, {}, 0);
    }
    return out;
  };
  const auto alone = run(false);
  EXPECT_EQ(alone, run(false));
  EXPECT_EQ(alone, run(true));

  // The fallback seed only matters without params.seed; different seeds give different streams.
  SamplingParams unseeded = params;
  unseeded.seed.reset();
  Sampler sampler;
  SamplerState x(unseeded, {}, 1), y(unseeded, {}, 2);
  int differ = 0;
  for (int step = 0; step < 50; ++step) {
    const auto logits = RandomLogits(vocab, step, 0.5f);
    differ += sampler.Sample(logits.data(), vocab, unseeded, x, {}, 0).token !=
              sampler.Sample(logits.data(), vocab, unseeded, y, {}, 0).token;
  }
  EXPECT_GT(differ, 10);
}

TEST(Sampler, PlainSamplingFollowsSoftmax) {
  const std::vector<float> logits = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f};
  SamplingParams params;
  params.temperature = 0.8f;
  std::vector<float> scaled(logits);
  for (float& x : scaled) x /= params.temperature;
  const auto expected = Softmax(scaled);
  const int draws = 20000;
  const auto counts = Draw(logits, params, draws);
  for (size_t i = 0; i < logits.size(); ++i) {
    const double freq = counts.count(i) ? counts.at(i) / double(draws) : 0.0;
    EXPECT_NEAR(freq, expected[i], 0.015) << "token " << i;
  }
}

TEST(Sampler, TopKKeepsOnlyTheKBest) {
  const std::vector<float> logits = {0.1f, 3.0f, 2.0f, 2.5f, -1.0f, 1.0f};
  SamplingParams params;
  params.top_k = 3;
  const auto counts = Draw(logits, params, 10000);
  for (const auto& [id, count] : counts) EXPECT_TRUE(id == 1 || id == 2 || id == 3) << id;
  const auto expected = Softmax({3.0f, 2.0f, 2.5f});
  EXPECT_NEAR(counts.at(1) / 1e4, expected[0], 0.02);
  EXPECT_NEAR(counts.at(2) / 1e4, expected[1], 0.02);
  EXPECT_NEAR(counts.at(3) / 1e4, expected[2], 0.02);
}

TEST(Sampler, TopPKeepsTheNucleus) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 (in shuffled id order).
  const std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f),
                                     std::log(0.3f)};
  SamplingParams params;
  params.top_p = 0.75f;  // 0.5 < 0.75 keeps the second, 0.8 >= 0.75 drops the third
  auto counts = Draw(logits, params, 10000);
  EXPECT_EQ(counts.count(0) + counts.count(2), 0u);
  EXPECT_NEAR(counts[1] / 1e4, 0.5 / 0.8, 0.02);
  EXPECT_NEAR(counts[3] / 1e4, 0.3 / 0.8, 0.02);

  params.top_p = 0.01f;  // keeps at least the top token
  counts = Draw(logits, params, 1000);
  EXPECT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts.begin()->first, 1);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  const std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f),
                                     std::log(0.3f)};
  SamplingParams params;
  params.min_p = 0.2f;  // threshold 0.1: drops only the 0.05 token
  const auto counts = Draw(logits, params, 10000);
  EXPECT_EQ(counts.count(2), 0u);
  EXPECT_NEAR(counts.at(0) / 1e4, 0.15 / 0.95, 0.02);
  EXPECT_NEAR(counts.at(1) / 1e4, 0.5 / 0.95, 0.02);
}

// Large vocabulary: every draw lies in the reference nucleus of the top-k (computed by a full
// sort), so the partial selection agrees with the definition.
TEST(Sampler, LargeVocabTopKTopPAgreesWithFullSort) {
  const size_t vocab = 200000;
  const auto logits = RandomLogits(vocab, 3, 2.0f);
  SamplingParams params;
  params.temperature = 0.9f;
  params.top_k = 500;
  params.top_p = 0.6f;
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  order.resize(params.top_k);
  std::vector<float> top;
  for (int32_t id : order) top.push_back(logits[id] / params.temperature);
  const auto probs = Softmax(top);
  size_t nucleus = 0;
  double above = 0;
  while (nucleus < probs.size() && above < params.top_p) above += probs[nucleus++];
  const std::set<int32_t> allowed(order.begin(), order.begin() + nucleus);
  const auto counts = Draw(logits, params, 300);
  for (const auto& [id, count] : counts) EXPECT_TRUE(allowed.count(id)) << id;
  EXPECT_GT(counts.size(), 5u);

  // top_p alone (no top_k) over the full vocabulary.
  params.top_k = 0;
  params.top_p = 0.05f;
  std::vector<int32_t> all(vocab);
  std::iota(all.begin(), all.end(), 0);
  std::vector<float> scaled(logits);
  for (float& x : scaled) x /= params.temperature;
  const auto full = Softmax(scaled);
  std::sort(all.begin(), all.end(), [&](int32_t a, int32_t b) {
    return scaled[a] > scaled[b] || (scaled[a] == scaled[b] && a < b);
  });
  std::set<int32_t> nucleus_ids;
  above = 0;
  for (size_t i = 0; i < vocab && above < params.top_p; ++i) {
    nucleus_ids.insert(all[i]);
    above += full[all[i]];
  }
  for (const auto& [id, count] : Draw(logits, params, 100)) EXPECT_TRUE(nucleus_ids.count(id));
}

TEST(Sampler, PenaltiesExact) {
  SamplingParams params;
  params.repetition_penalty = 2.0f;
  params.frequency_penalty = 0.5f;
  params.presence_penalty = 0.25f;
  const std::vector<int32_t> prompt = {0, 1, 1};
  SamplerState state(params, prompt, 0);
  state.Accept(2);
  state.Accept(2);
  state.Accept(1);
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -4.0f};
  ProcessLogits(logits, params, state, {}, 3);
  // 0: prompt only, positive -> /2. 1: prompt + output once, negative -> *2, then -0.5 -0.25.
  // 2: output twice, positive -> /2, then -1.0 -0.25. 3, 4: untouched.
  EXPECT_FLOAT_EQ(logits[0], 1.0f);
  EXPECT_FLOAT_EQ(logits[1], -2.0f - 0.75f);
  EXPECT_FLOAT_EQ(logits[2], 0.25f - 1.25f);
  EXPECT_FLOAT_EQ(logits[3], 3.0f);
  EXPECT_FLOAT_EQ(logits[4], -4.0f);
}

TEST(Sampler, LogitBiasChangesTheChoice) {
  std::vector<float> logits = {1.0f, 2.0f, 0.0f};
  SamplingParams params;
  params.temperature = 0.0f;
  params.logit_bias = {{2, 5.0f}, {1, -100.0f}};
  Sampler sampler;
  SamplerState state(params, {}, 0);
  EXPECT_EQ(sampler.Sample(logits.data(), 3, params, state, {}, 0).token, 2);
  ProcessLogits(logits, params, state, {}, 0);
  EXPECT_FLOAT_EQ(logits[2], 5.0f);
  EXPECT_FLOAT_EQ(logits[1], -98.0f);
}

TEST(Sampler, MinTokensMasksEosAndStopIds) {
  const std::vector<float> logits = {0.0f, 5.0f, 4.0f, 3.0f};  // 1 = EOS, 2 = a stop id
  const std::vector<int32_t> eos = {1};
  SamplingParams params;
  params.temperature = 0.0f;
  params.min_tokens = 2;
  params.stop_token_ids = {2};
  Sampler sampler;
  SamplerState state(params, {}, 0);
  EXPECT_EQ(sampler.Sample(logits.data(), 4, params, state, eos, 0).token, 3);
  EXPECT_EQ(sampler.Sample(logits.data(), 4, params, state, eos, 1).token, 3);
  EXPECT_EQ(sampler.Sample(logits.data(), 4, params, state, eos, 2).token, 1);
  params.ignore_eos = true;  // EOS is then an ordinary token, not masked
  EXPECT_EQ(sampler.Sample(logits.data(), 4, params, state, eos, 0).token, 1);
}

TEST(Sampler, LogprobsAreRawLogSoftmax) {
  const size_t vocab = 3000;
  auto logits = RandomLogits(vocab, 11);
  logits[10] = logits[20] = 20.0f;  // a tie at the top: lower id first
  SamplingParams params;
  params.temperature = 0.3f;
  params.repetition_penalty = 1.5f;
  params.logit_bias = {{5, 50.0f}};  // changes the choice, not the reported logprobs
  params.logprobs = 5;
  Sampler sampler;
  SamplerState state(params, std::vector<int32_t>{10, 20}, 0);
  const SampleResult r = sampler.Sample(logits.data(), vocab, params, state, {}, 0);
  EXPECT_EQ(r.token, 5);

  double max = *std::max_element(logits.begin(), logits.end()), sum = 0;
  for (float x : logits) sum += std::exp(double(x) - max);
  const double lse = max + std::log(sum);
  EXPECT_NEAR(r.logprob, logits[5] - lse, 1e-4);
  ASSERT_EQ(r.top_logprobs.size(), 5u);
  EXPECT_EQ(r.top_logprobs[0].first, 10);
  EXPECT_EQ(r.top_logprobs[1].first, 20);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(r.top_logprobs[i].first, order[i]);
    EXPECT_NEAR(r.top_logprobs[i].second, logits[order[i]] - lse, 1e-4);
  }
  const auto ls = LogSoftmax(logits.data(), vocab);
  EXPECT_NEAR(ls[123], logits[123] - lse, 1e-4);
  EXPECT_NEAR(TokenLogprob(logits.data(), vocab, 123), logits[123] - lse, 1e-4);
  EXPECT_EQ(TopLogprobs(logits.data(), vocab, 5), r.top_logprobs);

  params.logprobs = 0;
  const SampleResult r0 = sampler.Sample(logits.data(), vocab, params, state, {}, 0);
  EXPECT_TRUE(r0.top_logprobs.empty());
  EXPECT_NEAR(r0.logprob, logits[r0.token] - lse, 1e-4);
}

TEST(SamplingParams, ValidateAcceptsDefaultsAndRejectsEachBadValue) {
  const size_t vocab = 100;
  EXPECT_EQ(SamplingParams{}.Validate(vocab), "");
  SamplingParams edge;
  edge.temperature = 0.0f;
  edge.top_k = -1;
  edge.top_p = 1.0f;
  edge.min_p = 1.0f;
  edge.presence_penalty = -2.0f;
  edge.frequency_penalty = 2.0f;
  edge.logit_bias = {{99, -100.0f}};
  edge.logprobs = 20;
  edge.n = 128;
  edge.min_tokens = 16;
  EXPECT_EQ(edge.Validate(vocab), "");

  std::vector<std::pair<const char*, void (*)(SamplingParams&)>> cases = {
      {"temperature", [](SamplingParams& p) { p.temperature = -0.1f; }},
      {"temperature", [](SamplingParams& p) { p.temperature = NAN; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 0.0f; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 1.01f; }},
      {"top_k", [](SamplingParams& p) { p.top_k = -2; }},
      {"min_p", [](SamplingParams& p) { p.min_p = -0.1f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = 1.5f; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = 2.5f; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = -2.5f; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 0.0f; }},
      {"logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{100, 1.0f}};
       }},
      {"logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{-1, 1.0f}};
       }},
      {"logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{3, 101.0f}};
       }},
      {"stop_token_ids", [](SamplingParams& p) { p.stop_token_ids = {100}; }},
      {"logprobs", [](SamplingParams& p) { p.logprobs = 21; }},
      {"prompt_logprobs", [](SamplingParams& p) { p.prompt_logprobs = 21; }},
      {"n", [](SamplingParams& p) { p.n = 0; }},
      {"n", [](SamplingParams& p) { p.n = 129; }},
      {"max_tokens", [](SamplingParams& p) { p.max_tokens = 0; }},
      {"min_tokens", [](SamplingParams& p) { p.min_tokens = -1; }},
      {"min_tokens", [](SamplingParams& p) { p.min_tokens = 17; }},
      {"stop", [](SamplingParams& p) { p.stop = {""}; }},
  };
  for (const auto& [field, mutate] : cases) {
    SamplingParams p;
    mutate(p);
    const std::string error = p.Validate(vocab);
    EXPECT_NE(error.find(field), std::string::npos) << field << ": " << error;
  }
}

}  // namespace
}  // namespace moeserve::engine
