#include "server/request_parsing.h"

#include <algorithm>
#include <cmath>

#include "core/json_depth.h"
#include "core/log.h"
#include "server/api_error.h"
#include "server/request_limits.h"

namespace moeserve::server {
namespace {

const Json* Field(const Json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

[[noreturn]] void WrongType(const char* name, const char* want) {
  throw BadRequest(std::string("'") + name + "' must be " + want, name);
}

}  // namespace

Json ParseBody(const std::string& body) {
  if (JsonNestingDepth(body) > kMaxJsonDepth)
    throw BadRequest("the request body nests deeper than " + std::to_string(kMaxJsonDepth) +
                     " levels of arrays and objects");
  Json j;
  try {
    j = Json::parse(body);
  } catch (const Json::exception& e) {
    throw BadRequest(std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw BadRequest("the request body must be a JSON object");
  return j;
}

std::optional<bool> GetBool(const Json& body, const char* name) {
  const Json* f = Field(body, name);
  if (!f) return std::nullopt;
  if (!f->is_boolean()) WrongType(name, "a boolean");
  return f->get<bool>();
}

std::optional<int64_t> GetInt(const Json& body, const char* name) {
  const Json* f = Field(body, name);
  if (!f) return std::nullopt;
  if (f->is_number_integer()) {
    if (f->is_number_unsigned() && f->get<uint64_t>() > uint64_t(INT64_MAX))
      WrongType(name, "an integer in range");
    return f->get<int64_t>();
  }
  // Pydantic (vLLM) accepts 3.0 for an integer field, not 3.5.
  if (f->is_number_float()) {
    const double v = f->get<double>();
    if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9e15)
      return static_cast<int64_t>(v);
  }
  WrongType(name, "an integer");
}

std::optional<double> GetNumber(const Json& body, const char* name) {
  const Json* f = Field(body, name);
  if (!f) return std::nullopt;
  if (!f->is_number()) WrongType(name, "a number");
  return f->get<double>();
}

std::optional<std::string> GetString(const Json& body, const char* name) {
  const Json* f = Field(body, name);
  if (!f) return std::nullopt;
  if (!f->is_string()) WrongType(name, "a string");
  return f->get<std::string>();
}

void CheckModel(const Json& body, const ServingContext& ctx) {
  const std::optional<std::string> model = GetString(body, "model");
  if (model && !ctx.config.ServesModel(*model))
    throw ApiError(404, "The model `" + *model + "` does not exist.", "NotFoundError", "model",
                   "model_not_found");
}

namespace {

int ClampInt(int64_t v, const char* name) {
  if (v < INT32_MIN || v > INT32_MAX)
    throw BadRequest(std::string("'") + name + "' is out of range", name);
  return static_cast<int>(v);
}

// A string or a list of strings; each non-empty (vLLM: "stop cannot contain an empty string"),
// within the count and byte limits, checked before any is copied.
std::vector<std::string> ParseStop(const Json& body, const RequestLimits& limits) {
  const Json* f = Field(body, "stop");
  std::vector<std::string> out;
  if (!f) return out;
  if (!f->is_string() && !f->is_array()) WrongType("stop", "a string or a list of strings");
  const Json single = f->is_string() ? Json::array({*f}) : Json();
  const Json& list = f->is_string() ? single : *f;
  CheckLimit(list.size(), limits.max_stop_strings, "the number of stop strings", "max-stop-strings",
             "stop");
  size_t bytes = 0;
  for (const Json& s : list) {
    if (!s.is_string()) WrongType("stop", "a string or a list of strings");
    if (s.get_ref<const std::string&>().empty())
      throw BadRequest("'stop' cannot contain an empty string", "stop");
    bytes += s.get_ref<const std::string&>().size();
  }
  CheckLimit(bytes, limits.max_stop_bytes, "the bytes of all stop strings", "max-stop-bytes",
             "stop");
  for (const Json& s : list) out.push_back(s.get<std::string>());
  return out;
}

std::vector<int32_t> ParseIdList(const Json& body, const char* name) {
  const Json* f = Field(body, name);
  std::vector<int32_t> out;
  if (!f) return out;
  if (!f->is_array()) WrongType(name, "a list of integers");
  for (const Json& v : *f) {
    if (!v.is_number_integer()) WrongType(name, "a list of integers");
    const int64_t id = v.get<int64_t>();
    if (id < 0 || id > INT32_MAX)
      throw BadRequest(std::string("'") + name + "' has an out-of-range id", name);
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

// -100 (the logit_bias floor) for every token outside `allowed`: a ban, with the allowed
// tokens' logits untouched.
void AllowOnly(const std::vector<int32_t>& allowed, size_t vocab_size,
               std::vector<std::pair<int32_t, float>>& bias) {
  std::vector<bool> keep(vocab_size, false);
  for (int32_t id : allowed) keep[static_cast<size_t>(id)] = true;
  for (size_t id = 0; id < vocab_size; ++id)
    if (!keep[id]) bias.emplace_back(static_cast<int32_t>(id), -100.0f);
}

// vLLM's bad_words: each word as written (leading spaces stripped) and with one leading space
// when that tokenizes to as many tokens. A one-token form is banned outright; vLLM bans longer
// forms' last token after the others, which needs the sampler to see the sequence: refused here.
void BanWords(const Json& words, const ServingContext& ctx,
              std::vector<std::pair<int32_t, float>>& bias) {
  if (!words.is_array()) WrongType("bad_words", "a list of strings");
  CheckLimit(words.size(), ctx.config.limits.max_stop_strings, "the number of bad_words",
             "max-stop-strings", "bad_words");
  for (const Json& w : words) {
    if (!w.is_string()) WrongType("bad_words", "a list of strings");
    std::string word = w.get<std::string>();
    word.erase(0, word.find_first_not_of(' '));
    if (word.empty()) throw BadRequest("'bad_words' cannot contain an empty word", "bad_words");
    const std::vector<int32_t> plain = ctx.tokenizer.Encode(word, false);
    const std::vector<int32_t> spaced = ctx.tokenizer.Encode(" " + word, false);
    std::vector<std::vector<int32_t>> forms = {plain};
    if (spaced.size() == plain.size() && spaced[0] != plain[0]) forms.push_back(spaced);
    for (const auto& f : forms) {
      if (f.size() != 1)
        throw BadRequest("'bad_words' entry \"" + w.get<std::string>() + "\" is " +
                             std::to_string(f.size()) +
                             " tokens; only words of a single token are supported",
                         "bad_words");
      bias.emplace_back(f[0], -100.0f);
    }
  }
}

}  // namespace

const std::initializer_list<std::string_view> kSamplingFields = {"model",
                                                                 "temperature",
                                                                 "top_p",
                                                                 "top_k",
                                                                 "min_p",
                                                                 "seed",
                                                                 "presence_penalty",
                                                                 "frequency_penalty",
                                                                 "repetition_penalty",
                                                                 "min_tokens",
                                                                 "ignore_eos",
                                                                 "skip_special_tokens",
                                                                 "stop_token_ids",
                                                                 "stop",
                                                                 "n",
                                                                 "logit_bias",
                                                                 "max_tokens",
                                                                 "include_stop_str_in_output",
                                                                 "priority",
                                                                 "prompt_logprobs",
                                                                 "allowed_token_ids",
                                                                 "bad_words",
                                                                 "truncate_prompt_tokens",
                                                                 "stream",
                                                                 "stream_options",
                                                                 "logprobs",
                                                                 "return_tokens_as_token_ids"};

void TruncatePrompt(std::vector<int32_t>& ids, std::optional<size_t> keep) {
  if (keep && ids.size() > *keep) ids.erase(ids.begin(), ids.end() - static_cast<ptrdiff_t>(*keep));
}

void LogIgnoredFields(const char* route, const Json& body,
                      std::initializer_list<std::initializer_list<std::string_view>> used,
                      const std::vector<std::string>& also_ignored) {
  std::string names;
  auto add = [&names](std::string_view name) {
    names += names.empty() ? "" : ", ";
    names += name;
  };
  for (const auto& [key, value] : body.items()) {
    bool known = false;
    for (const auto& list : used) known |= std::find(list.begin(), list.end(), key) != list.end();
    if (!known) add(key);
  }
  for (const std::string& name : also_ignored) add(name);
  if (!names.empty())
    LogWarn(route, ": the request's fields ", names, " were ignored (not supported)");
}

ParsedSampling ParseSampling(const Json& body, const ServingContext& ctx, bool chat) {
  ParsedSampling r;
  engine::SamplingParams& p = r.params;
  const ServerConfig& c = ctx.config;
  p.temperature = static_cast<float>(
      GetNumber(body, "temperature").value_or(c.default_temperature.value_or(1.0f)));
  p.top_p = static_cast<float>(GetNumber(body, "top_p").value_or(c.default_top_p.value_or(1.0f)));
  p.top_k = ClampInt(GetInt(body, "top_k").value_or(c.default_top_k.value_or(0)), "top_k");
  p.min_p = static_cast<float>(GetNumber(body, "min_p").value_or(0.0));
  if (auto seed = GetInt(body, "seed")) p.seed = static_cast<uint64_t>(*seed);
  p.presence_penalty = static_cast<float>(GetNumber(body, "presence_penalty").value_or(0.0));
  p.frequency_penalty = static_cast<float>(GetNumber(body, "frequency_penalty").value_or(0.0));
  p.repetition_penalty = static_cast<float>(GetNumber(body, "repetition_penalty").value_or(1.0));
  p.min_tokens = ClampInt(GetInt(body, "min_tokens").value_or(0), "min_tokens");
  if (p.min_tokens < 0) throw BadRequest("'min_tokens' must be >= 0", "min_tokens");
  p.ignore_eos = GetBool(body, "ignore_eos").value_or(false);
  p.skip_special_tokens = GetBool(body, "skip_special_tokens").value_or(true);
  p.stop_token_ids = ParseIdList(body, "stop_token_ids");
  p.stop = ParseStop(body, c.limits);
  const int64_t n = GetInt(body, "n").value_or(1);
  if (n < 1 || n > engine::SamplingParams::kMaxN)
    throw BadRequest("'n' must be in [1, " + std::to_string(engine::SamplingParams::kMaxN) +
                         "], got " + std::to_string(n),
                     "n");
  p.n = static_cast<int>(n);
  if (const Json* bias = Field(body, "logit_bias")) {
    if (!bias->is_object()) WrongType("logit_bias", "an object of token id -> bias");
    for (const auto& [key, value] : bias->items()) {
      size_t used = 0;
      long id = -1;
      try {
        id = std::stol(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != key.size() || id < 0 || id > INT32_MAX)
        throw BadRequest("'logit_bias' key \"" + key + "\" is not a token id", "logit_bias");
      if (!value.is_number()) WrongType("logit_bias", "an object of token id -> number");
      p.logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
    }
  }
  std::optional<int64_t> max_tokens = GetInt(body, "max_tokens");
  if (chat) {
    if (auto mct = GetInt(body, "max_completion_tokens")) max_tokens = mct;
  }
  if (max_tokens) {
    const char* field =
        chat && Field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if (*max_tokens < 1)
      throw BadRequest(
          std::string("'") + field + "' must be at least 1, got " + std::to_string(*max_tokens),
          field);
    r.max_tokens = static_cast<int>(std::min<int64_t>(*max_tokens, INT32_MAX));
  }
  if (const std::optional<int64_t> priority = GetInt(body, "priority"); priority && *priority != 0)
    throw BadRequest("priority " + std::to_string(*priority) +
                         " needs priority scheduling, which this server does not have (requests "
                         "run first come, first served); send priority 0 or omit it",
                     "priority");
  if (const std::optional<int64_t> plp = GetInt(body, "prompt_logprobs")) {
    if (*plp < 0 || *plp > engine::SamplingParams::kMaxLogprobs)
      throw BadRequest("'prompt_logprobs' must be in [0, 20]", "prompt_logprobs");
    if (GetBool(body, "stream").value_or(false))
      throw BadRequest("'prompt_logprobs' is not available when streaming", "prompt_logprobs");
    p.prompt_logprobs = r.prompt_logprobs = static_cast<int>(*plp);
  }
  if (Field(body, "allowed_token_ids")) {
    const std::vector<int32_t> allowed = ParseIdList(body, "allowed_token_ids");
    if (allowed.empty())
      throw BadRequest("'allowed_token_ids' must not be empty", "allowed_token_ids");
    for (int32_t id : allowed)
      if (static_cast<size_t>(id) >= ctx.engine.vocab_size())
        throw BadRequest("'allowed_token_ids' holds " + std::to_string(id) +
                             ", outside the vocabulary (size " +
                             std::to_string(ctx.engine.vocab_size()) + ")",
                         "allowed_token_ids");
    AllowOnly(allowed, ctx.engine.vocab_size(), p.logit_bias);
  }
  if (const Json* words = Field(body, "bad_words")) BanWords(*words, ctx, p.logit_bias);
  if (const std::optional<int64_t> t = GetInt(body, "truncate_prompt_tokens")) {
    const size_t max_len = ctx.engine.max_model_len();
    if (*t < -1 || *t == 0)
      throw BadRequest("'truncate_prompt_tokens' must be -1 or at least 1",
                       "truncate_prompt_tokens");
    if (*t > static_cast<int64_t>(max_len))
      throw BadRequest("'truncate_prompt_tokens' (" + std::to_string(*t) +
                           ") is greater than max_model_len (" + std::to_string(max_len) +
                           "); send a smaller value",
                       "truncate_prompt_tokens");
    r.truncate_prompt_tokens = *t == -1 ? max_len : static_cast<size_t>(*t);
  }
  r.text.stop = p.stop;
  r.text.skip_special_tokens = p.skip_special_tokens;
  r.text.include_stop_str_in_output = GetBool(body, "include_stop_str_in_output").value_or(false);
  return r;
}

void CheckPromptBytes(size_t bytes, const ServingContext& ctx, const char* param) {
  const size_t max_len = ctx.engine.max_model_len();
  if (ctx.max_bytes_per_token == 0 || bytes <= max_len * ctx.max_bytes_per_token) return;
  throw BadRequest("This model's maximum context length is " + std::to_string(max_len) +
                       " tokens. However, your prompt has " + std::to_string(bytes) +
                       " bytes, more than " + std::to_string(max_len) + " tokens can hold.",
                   param);
}

void ValidateSampling(const engine::SamplingParams& params, const ServingContext& ctx) {
  if (std::string e = params.Validate(ctx.engine.vocab_size()); !e.empty()) {
    const std::string field = e.substr(0, e.find(' '));
    throw BadRequest(e, field);
  }
}

}  // namespace moeserve::server
