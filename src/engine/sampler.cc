#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>

#include "core/check.h"

namespace moeserve::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Uniform in [0, 1) from 53 random bits; spelled out so the stream does not depend on the
// standard library's distribution code.
double Uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// Orders ids by value descending, then id ascending: the tie rule of every selection here.
struct HigherFirst {
  const float* values;
  bool operator()(int32_t a, int32_t b) const {
    return values[a] > values[b] || (values[a] == values[b] && a < b);
  }
};

}  // namespace

std::string SamplingParams::Validate(size_t vocab_size) const {
  auto bad = [](const char* field, auto value, const char* want) {
    return detail::Concat(field, " must be ", want, ", got ", value);
  };
  if (!(temperature >= 0.0f) || !std::isfinite(temperature))
    return bad("temperature", temperature, ">= 0");
  if (!(top_p > 0.0f && top_p <= 1.0f)) return bad("top_p", top_p, "in (0, 1]");
  if (top_k < -1) return bad("top_k", top_k, "-1, 0 (disabled) or at least 1");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return bad("min_p", min_p, "in [0, 1]");
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return bad("presence_penalty", presence_penalty, "in [-2, 2]");
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return bad("frequency_penalty", frequency_penalty, "in [-2, 2]");
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty))
    return bad("repetition_penalty", repetition_penalty, "> 0");
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || static_cast<size_t>(id) >= vocab_size)
      return detail::Concat("logit_bias token id ", id, " is out of vocabulary (size ", vocab_size,
                            ")");
    if (!(bias >= -100.0f && bias <= 100.0f))
      return detail::Concat("logit_bias value for token ", id, " must be in [-100, 100], got ",
                            bias);
  }
  for (int32_t id : stop_token_ids)
    if (id < 0 || static_cast<size_t>(id) >= vocab_size)
      return detail::Concat("stop_token_ids entry ", id, " is out of vocabulary (size ", vocab_size,
                            ")");
  if (logprobs < -1 || logprobs > kMaxLogprobs) return bad("logprobs", logprobs, "in [0, 20]");
  if (prompt_logprobs < -1 || prompt_logprobs > kMaxLogprobs)
    return bad("prompt_logprobs", prompt_logprobs, "in [0, 20]");
  if (n < 1 || n > kMaxN) return bad("n", n, "in [1, 128]");
  if (max_tokens < 1) return bad("max_tokens", max_tokens, "at least 1");
  if (min_tokens < 0) return bad("min_tokens", min_tokens, ">= 0");
  if (min_tokens > max_tokens)
    return detail::Concat("min_tokens (", min_tokens, ") must be <= max_tokens (", max_tokens, ")");
  for (const std::string& s : stop)
    if (s.empty()) return "stop strings must not be empty";
  return "";
}

SamplerState::SamplerState(const SamplingParams& params, std::span<const int32_t> prompt_tokens,
                           uint64_t fallback_seed)
    : rng_(params.seed.value_or(fallback_seed)) {
  if (params.repetition_penalty != 1.0f) {
    prompt_tokens_.assign(prompt_tokens.begin(), prompt_tokens.end());
    std::sort(prompt_tokens_.begin(), prompt_tokens_.end());
    prompt_tokens_.erase(std::unique(prompt_tokens_.begin(), prompt_tokens_.end()),
                         prompt_tokens_.end());
  }
}

void SamplerState::Accept(int32_t token) {
  ++output_counts_[token];
}

float LogSumExp(const float* logits, size_t vocab) {
  float max_logit = kNegInf;
  for (size_t i = 0; i < vocab; ++i) max_logit = std::max(max_logit, logits[i]);
  if (max_logit == kNegInf) return kNegInf;
  double sum = 0.0;
  for (size_t i = 0; i < vocab; ++i) sum += std::exp(logits[i] - max_logit);
  return max_logit + static_cast<float>(std::log(sum));
}

std::vector<float> LogSoftmax(const float* logits, size_t vocab) {
  const float lse = LogSumExp(logits, vocab);
  std::vector<float> out(vocab);
  for (size_t i = 0; i < vocab; ++i) out[i] = logits[i] - lse;
  return out;
}

float TokenLogprob(const float* logits, size_t vocab, int32_t token) {
  MOESERVE_CHECK(token >= 0 && static_cast<size_t>(token) < vocab, "token ", token, " vocab ",
                 vocab);
  return logits[token] - LogSumExp(logits, vocab);
}

namespace {
// The k best of `count` ids (ids[i], or i when ids is null) by HigherFirst, sorted best first.
// A bounded heap: O(count log k), and most ids cost one comparison with the heap's worst.
std::vector<int32_t> TopIds(const float* values, const int32_t* ids, size_t count, size_t k) {
  k = std::min(k, count);
  if (k == 0) return {};
  HigherFirst better{values};
  // std heap with `better` as "less" keeps the worst of the kept ids at the front.
  std::vector<int32_t> heap;
  heap.reserve(k);
  for (size_t i = 0; i < count; ++i) {
    const auto id = ids ? ids[i] : static_cast<int32_t>(i);
    if (heap.size() < k) {
      heap.push_back(id);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (better(id, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = id;
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  std::sort(heap.begin(), heap.end(), better);
  return heap;
}

std::vector<int32_t> TopIds(const float* values, size_t vocab, size_t k) {
  return TopIds(values, nullptr, vocab, k);
}

// Reorders ids so that the nucleus comes first and returns its size: the ids, best first by
// HigherFirst on `values`, whose predecessors' weights sum to < target. Weighted quickselect,
// expected O(n): no sort even when the nucleus holds most of a flat distribution.
size_t NucleusSize(std::vector<int32_t>& ids, const float* values, const float* weights,
                   double target) {
  const HigherFirst better{values};
  size_t lo = 0, hi = ids.size();
  double above = 0.0;  // weight of ids[0, lo), all kept
  while (lo < hi) {
    std::swap(ids[lo + (hi - lo) / 2], ids[hi - 1]);
    const int32_t pivot = ids[hi - 1];
    const auto mid = std::partition(ids.begin() + lo, ids.begin() + hi - 1,
                                    [&](int32_t id) { return better(id, pivot); });
    const size_t split = static_cast<size_t>(mid - ids.begin());
    std::swap(ids[split], ids[hi - 1]);  // pivot between the better and the worse part
    double upper = 0.0;
    for (size_t i = lo; i < split; ++i) upper += weights[ids[i]];
    if (above + upper >= target) {
      hi = split;  // the cut is among the better part
    } else if (above + upper + weights[pivot] >= target) {
      return split + 1;  // the pivot is the last kept
    } else {
      above += upper + weights[pivot];
      lo = split + 1;
    }
  }
  return std::max<size_t>(lo, 1);
}
}  // namespace

std::vector<std::pair<int32_t, float>> TopLogprobs(const float* logits, size_t vocab, size_t k) {
  const float lse = LogSumExp(logits, vocab);
  std::vector<std::pair<int32_t, float>> out;
  for (int32_t id : TopIds(logits, vocab, k)) out.emplace_back(id, logits[id] - lse);
  return out;
}

int32_t ArgMax(const float* logits, size_t vocab) {
  MOESERVE_CHECK(vocab > 0);
  size_t best = 0;
  for (size_t i = 1; i < vocab; ++i)
    if (logits[i] > logits[best]) best = i;  // strict: ties keep the lower id
  return static_cast<int32_t>(best);
}

void ProcessLogits(std::span<float> logits, const SamplingParams& params, const SamplerState& state,
                   std::span<const int32_t> eos_ids, size_t num_generated) {
  float* w = logits.data();
  const size_t vocab = logits.size();
  auto in_vocab = [vocab](int32_t id) { return id >= 0 && static_cast<size_t>(id) < vocab; };

  if (num_generated < static_cast<size_t>(std::max(params.min_tokens, 0))) {
    if (!params.ignore_eos)
      for (int32_t id : eos_ids)
        if (in_vocab(id)) w[id] = kNegInf;
    for (int32_t id : params.stop_token_ids)
      if (in_vocab(id)) w[id] = kNegInf;
  }
  for (const auto& [id, bias] : params.logit_bias)
    if (in_vocab(id)) w[id] += bias;

  if (params.repetition_penalty != 1.0f) {
    const float penalty = params.repetition_penalty;
    auto apply = [&](int32_t id) {
      if (in_vocab(id)) w[id] = w[id] > 0.0f ? w[id] / penalty : w[id] * penalty;
    };
    const auto& prompt = state.prompt_tokens();
    for (int32_t id : prompt) apply(id);
    for (const auto& [id, count] : state.output_counts())
      if (!std::binary_search(prompt.begin(), prompt.end(), id)) apply(id);
  }
  if (params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f) {
    for (const auto& [id, count] : state.output_counts())
      if (in_vocab(id) && count > 0)
        w[id] -= static_cast<float>(count) * params.frequency_penalty + params.presence_penalty;
  }
}

SampleResult Sampler::Sample(const float* logits, size_t vocab, const SamplingParams& params,
                             SamplerState& state, std::span<const int32_t> eos_ids,
                             size_t num_generated) {
  MOESERVE_CHECK(vocab > 0);
  work_.assign(logits, logits + vocab);
  float* w = work_.data();
  ProcessLogits(work_, params, state, eos_ids, num_generated);

  SampleResult result;
  if (params.IsGreedy() || params.top_k == 1) {
    result.token = ArgMax(w, vocab);
  } else {
    result.token = SampleFiltered(params, state.rng(), vocab);
  }

  if (params.logprobs >= 0) {
    const float lse = LogSumExp(logits, vocab);
    result.logprob = logits[result.token] - lse;
    for (int32_t id : TopIds(logits, vocab, static_cast<size_t>(params.logprobs)))
      result.top_logprobs.emplace_back(id, logits[id] - lse);
  }
  return result;
}

int32_t Sampler::SampleFiltered(const SamplingParams& params, std::mt19937_64& rng, size_t vocab) {
  float* w = work_.data();
  // Divide (not multiply by the reciprocal) to round as vLLM does.
  const float temperature = params.temperature;
  float max_logit = kNegInf;
  for (size_t i = 0; i < vocab; ++i) {
    w[i] /= temperature;
    max_logit = std::max(max_logit, w[i]);
  }
  // One draw per sampled token whatever the filters, so the RNG stream depends only on the
  // number of tokens sampled.
  const double u = Uniform01(rng);
  if (max_logit == kNegInf) return ArgMax(w, vocab);  // everything masked

  // cand_ holds the surviving ids once any filter has run; until then all ids survive.
  bool filtered = false;
  auto all_ids = [&] {
    cand_.resize(vocab);
    std::iota(cand_.begin(), cand_.end(), 0);
    filtered = true;
  };
  if (params.min_p > 0.0f) {
    // prob_i >= min_p * prob_max  <=>  w_i - max >= log(min_p)
    const float threshold = max_logit + std::log(params.min_p);
    cand_.clear();
    for (size_t i = 0; i < vocab; ++i)
      if (w[i] >= threshold) cand_.push_back(static_cast<int32_t>(i));
    filtered = true;
  }
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < (filtered ? cand_.size() : vocab)) {
    const auto k = static_cast<size_t>(params.top_k);
    if (k <= 4096) {  // a bounded heap beats nth_element when k is small
      cand_ = filtered ? TopIds(w, cand_.data(), cand_.size(), k) : TopIds(w, nullptr, vocab, k);
      filtered = true;
    } else {
      if (!filtered) all_ids();
      std::nth_element(cand_.begin(), cand_.begin() + k, cand_.end(), HigherFirst{w});
      cand_.resize(k);
    }
  }
  if (params.top_p < 1.0f) {
    if (!filtered) all_ids();
    weights_.resize(vocab);  // indexed by id
    double total = 0.0;
    for (int32_t id : cand_) total += weights_[id] = std::exp(w[id] - max_logit);
    // Nucleus: keep a token while the mass of the tokens ranked above it is < top_p (vLLM's
    // rule, which always keeps the first).
    const double target = static_cast<double>(params.top_p) * total;
    cand_.resize(NucleusSize(cand_, w, weights_.data(), target));
  }

  if (!filtered) {
    weights_.resize(vocab);
    double total = 0.0;
    for (size_t i = 0; i < vocab; ++i) total += weights_[i] = std::exp(w[i] - max_logit);
    const double r = u * total;
    double acc = 0.0;
    int32_t last_positive = ArgMax(w, vocab);
    for (size_t i = 0; i < vocab; ++i) {
      if (weights_[i] <= 0.0f) continue;
      acc += weights_[i];
      last_positive = static_cast<int32_t>(i);
      if (acc > r) return static_cast<int32_t>(i);
    }
    return last_positive;  // rounding left r at the very top
  }
  weights_.resize(cand_.size());
  double total = 0.0;
  for (size_t i = 0; i < cand_.size(); ++i)
    total += weights_[i] = std::exp(w[cand_[i]] - max_logit);
  const double r = u * total;
  double acc = 0.0;
  int32_t last_positive = cand_.front();  // the best candidate: weight 1
  for (size_t i = 0; i < cand_.size(); ++i) {
    if (weights_[i] <= 0.0f) continue;
    acc += weights_[i];
    last_positive = cand_[i];
    if (acc > r) return cand_[i];
  }
  return last_positive;
}

}  // namespace moeserve::engine
