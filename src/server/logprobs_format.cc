#include "server/logprobs_format.h"

#include <cmath>

namespace moeserve::server {
namespace {

double Finite(float lp) {
  return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0;
}

std::string TokenText(const tokenizer::Tokenizer& tok, int32_t id, bool as_ids) {
  if (as_ids) return "token_id:" + std::to_string(id);
  const int32_t ids[1] = {id};
  return tok.Decode(ids, /*skip_special_tokens=*/false);
}

Json Bytes(const std::string& s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

void CompletionLogprobs::Add(const std::optional<engine::TokenLogprobs>& lp, int32_t token) {
  const std::string text = TokenText(tok_, token, as_ids_);
  tokens_.push_back(text);
  offsets_.push_back(text_offset_);
  text_offset_ += text.size();
  if (!lp) {
    token_logprobs_.push_back(nullptr);
    top_.push_back(nullptr);
    return;
  }
  token_logprobs_.push_back(Finite(lp->logprob));
  Json top = Json::object();
  for (size_t i = 0; i < lp->top.size() && i < static_cast<size_t>(num_top_); ++i)
    top[TokenText(tok_, lp->top[i].first, as_ids_)] = Finite(lp->top[i].second);
  // vLLM lists the sampled token among the top ones even when it is not in the top k.
  if (!top.contains(text)) top[text] = Finite(lp->logprob);
  top_.push_back(std::move(top));
}

Json CompletionLogprobs::Take() {
  Json out = {{"tokens", std::move(tokens_)},
              {"token_logprobs", std::move(token_logprobs_)},
              {"top_logprobs", std::move(top_)},
              {"text_offset", std::move(offsets_)}};
  tokens_ = Json::array();
  token_logprobs_ = Json::array();
  top_ = Json::array();
  offsets_ = Json::array();
  return out;
}

Json PromptLogprobsJson(const tokenizer::Tokenizer& tok,
                        const std::vector<std::optional<engine::TokenLogprobs>>& logprobs,
                        const std::vector<int32_t>& prompt, int num_top) {
  Json out = Json::array();
  for (size_t i = 0; i < prompt.size(); ++i) {
    const std::optional<engine::TokenLogprobs>& lp =
        i < logprobs.size() ? logprobs[i] : std::optional<engine::TokenLogprobs>();
    if (!lp) {
      out.push_back(nullptr);
      continue;
    }
    Json position = Json::object();
    Json rank = nullptr;
    for (size_t k = 0; k < lp->top.size(); ++k)
      if (lp->top[k].first == prompt[i]) rank = k + 1;
    position[std::to_string(prompt[i])] = {{"logprob", Finite(lp->logprob)},
                                           {"rank", rank},
                                           {"decoded_token", TokenText(tok, prompt[i], false)}};
    for (size_t k = 0; k < lp->top.size() && k < static_cast<size_t>(num_top); ++k)
      position[std::to_string(lp->top[k].first)] = {
          {"logprob", Finite(lp->top[k].second)},
          {"rank", k + 1},
          {"decoded_token", TokenText(tok, lp->top[k].first, false)}};
    out.push_back(std::move(position));
  }
  return out;
}

Json ChatLogprobEntry(const tokenizer::Tokenizer& tok, const engine::TokenLogprobs& lp, int num_top,
                      bool as_ids) {
  const std::string text = TokenText(tok, lp.token, as_ids);
  Json top = Json::array();
  for (size_t i = 0; i < lp.top.size() && i < static_cast<size_t>(num_top); ++i) {
    const std::string t = TokenText(tok, lp.top[i].first, as_ids);
    top.push_back({{"token", t}, {"logprob", Finite(lp.top[i].second)}, {"bytes", Bytes(t)}});
  }
  return {{"token", text},
          {"logprob", Finite(lp.logprob)},
          {"bytes", Bytes(text)},
          {"top_logprobs", std::move(top)}};
}

}  // namespace moeserve::server
