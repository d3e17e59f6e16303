#include "server/completion_request.h"

#include "server/api_error.h"
#include "server/request_limits.h"

namespace moeserve::server {
namespace {

std::vector<int32_t> TokenIds(const Json& list, const ServingContext& ctx) {
  std::vector<int32_t> ids;
  for (const Json& v : list) {
    if (!v.is_number_integer())
      throw BadRequest("'prompt' token lists must hold integers", "prompt");
    const int64_t id = v.get<int64_t>();
    if (id < 0 || static_cast<uint64_t>(id) >= ctx.engine.vocab_size())
      throw BadRequest("token id " + std::to_string(id) + " in 'prompt' is outside the vocabulary",
                       "prompt");
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// Each prompt becomes n engine sequences: their number is checked before any prompt is tokenized.
std::vector<CompletionPrompt> ParsePrompts(const Json& body, const ServingContext& ctx, int n,
                                           std::optional<size_t> truncate) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) throw BadRequest("'prompt' is required", "prompt");
  const Json& p = *it;
  const bool many = p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array());
  const size_t num_prompts = many ? p.size() : 1;
  CheckLimit(num_prompts * static_cast<size_t>(n), ctx.config.limits.max_sequences,
             "the sequences this request asks for ('prompt' count x 'n')",
             "max-sequences-per-request", "prompt");
  std::vector<CompletionPrompt> out;
  auto from_text = [&](const std::string& s) {
    if (s.empty()) throw BadRequest("'prompt' must not be empty", "prompt");
    CheckPromptBytes(s.size(), ctx, "prompt");
    std::vector<int32_t> ids = ctx.tokenizer.Encode(s, /*add_special_tokens=*/true);
    if (truncate && ids.size() > *truncate) {
      TruncatePrompt(ids, truncate);
      out.push_back({ids, ctx.tokenizer.Decode(ids, false)});
    } else {
      out.push_back({std::move(ids), s});
    }
  };
  auto from_ids = [&](const Json& list) {
    if (list.empty()) throw BadRequest("'prompt' must not be empty", "prompt");
    std::vector<int32_t> ids = TokenIds(list, ctx);
    TruncatePrompt(ids, truncate);
    out.push_back({ids, ctx.tokenizer.Decode(ids, false)});
  };
  if (p.is_string()) {
    from_text(p.get<std::string>());
  } else if (p.is_array()) {
    if (p.empty()) throw BadRequest("'prompt' must not be empty", "prompt");
    if (p[0].is_string()) {
      for (const Json& s : p) {
        if (!s.is_string()) throw BadRequest("'prompt' list mixes types", "prompt");
        from_text(s.get<std::string>());
      }
    } else if (p[0].is_array()) {
      for (const Json& l : p) {
        if (!l.is_array()) throw BadRequest("'prompt' list mixes types", "prompt");
        from_ids(l);
      }
    } else if (p[0].is_number_integer()) {
      from_ids(p);
    } else {
      throw BadRequest("'prompt' must be a string, a list of strings or token ids", "prompt");
    }
  } else {
    throw BadRequest("'prompt' must be a string, a list of strings or token ids", "prompt");
  }
  for (const CompletionPrompt& pr : out)
    if (pr.ids.empty()) throw BadRequest("'prompt' tokenizes to nothing", "prompt");
  return out;
}

}  // namespace

CompletionRequest ParseCompletionRequest(const Json& body, const ServingContext& ctx) {
  CompletionRequest r;
  if (auto suffix = body.find("suffix"); suffix != body.end() && !suffix->is_null())
    throw BadRequest("'suffix' is not supported", "suffix");
  r.sampling = ParseSampling(body, ctx, /*chat=*/false);
  engine::SamplingParams& params = r.sampling.params;
  params.max_tokens = r.sampling.max_tokens.value_or(16);
  if (auto best_of = GetInt(body, "best_of"); best_of && *best_of != params.n)
    throw BadRequest("'best_of' must equal 'n' (no server-side selection)", "best_of");
  r.echo = GetBool(body, "echo").value_or(false);
  r.as_token_ids = GetBool(body, "return_tokens_as_token_ids").value_or(false);
  if (const std::optional<int64_t> logprobs = GetInt(body, "logprobs")) {
    if (*logprobs < 0 || *logprobs > engine::SamplingParams::kMaxLogprobs)
      throw BadRequest("'logprobs' must be in [0, 20]", "logprobs");
    r.logprobs = static_cast<int>(*logprobs);
    params.logprobs = r.logprobs;
    if (r.echo) params.prompt_logprobs = std::max(params.prompt_logprobs, params.logprobs);
  }
  r.stream = GetBool(body, "stream").value_or(false);
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) throw BadRequest("'stream_options' must be an object", "stream_options");
    r.include_usage = GetBool(*so, "include_usage").value_or(false);
  }
  if (auto rf = body.find("response_format"); rf != body.end()) r.response_format = *rf;
  r.constraint = ParseConstraint(body);
  ValidateSampling(params, ctx);
  r.prompts = ParsePrompts(body, ctx, params.n, r.sampling.truncate_prompt_tokens);
  ApplyConstraint(r.constraint, /*reasoning_opened=*/false, ctx.structured_outputs, params);
  LogIgnoredFields("POST /v1/completions", body,
                   {kSamplingFields, kConstraintFields, {"prompt", "suffix", "best_of", "echo"}});
  return r;
}

}  // namespace moeserve::server
