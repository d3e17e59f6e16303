#include "server/request_parsing.h"

#include <cmath>

#include "core/json_depth.h"
#include "server/api_error.h"

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

}  // namespace

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
