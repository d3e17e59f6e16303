// POST /v1/completions (OpenAI legacy completions, with vLLM's extra sampling fields).
#include <random>

#include "server/api_error.h"
#include "server/logprobs_format.h"
#include "server/memory_release.h"
#include "server/routes.h"

namespace moeserve::server {

std::string RandomId(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return std::string(prefix) + "-" + buf;
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

struct Prompt {
  std::vector<int32_t> ids;
  std::string text;  // for echo
};

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

// prompt: a string, a list of strings, a list of token ids or a list of token-id lists. Each
// prompt becomes n engine sequences: their number is checked before any prompt is tokenized.
std::vector<Prompt> ParsePrompts(const Json& body, const ServingContext& ctx, int n) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) throw BadRequest("'prompt' is required", "prompt");
  const Json& p = *it;
  const bool many = p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array());
  const size_t num_prompts = many ? p.size() : 1;
  CheckLimit(num_prompts * static_cast<size_t>(n), ctx.config.limits.max_sequences,
             "the sequences this request asks for ('prompt' count x 'n')",
             "max-sequences-per-request", "prompt");
  std::vector<Prompt> out;
  auto from_text = [&](const std::string& s) {
    if (s.empty()) throw BadRequest("'prompt' must not be empty", "prompt");
    CheckPromptBytes(s.size(), ctx, "prompt");
    out.push_back({ctx.tokenizer.Encode(s, /*add_special_tokens=*/true), s});
  };
  auto from_ids = [&](const Json& list) {
    if (list.empty()) throw BadRequest("'prompt' must not be empty", "prompt");
    std::vector<int32_t> ids = TokenIds(list, ctx);
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
  for (const Prompt& pr : out)
    if (pr.ids.empty()) throw BadRequest("'prompt' tokenizes to nothing", "prompt");
  return out;
}

// Per-choice accumulated state of a completion.
struct ChoiceState {
  std::string text;
  std::unique_ptr<CompletionLogprobs> logprobs;
  std::string finish_reason;
  size_t output_tokens = 0;
  bool echoed = false;
};

}  // namespace

void HandleCompletions(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const ReleaseAfterLargeRequest release_memory(req.body.size());  // destroyed last
  const Json body = ParseBody(req.body);
  CheckModel(body, ctx);
  if (auto suffix = body.find("suffix"); suffix != body.end() && !suffix->is_null())
    throw BadRequest("'suffix' is not supported", "suffix");
  ParsedSampling ps = ParseSampling(body, ctx, /*chat=*/false);
  engine::SamplingParams& params = ps.params;
  params.max_tokens = ps.max_tokens.value_or(16);
  if (auto best_of = GetInt(body, "best_of"); best_of && *best_of != params.n)
    throw BadRequest("'best_of' must equal 'n' (no server-side selection)", "best_of");
  const bool echo = GetBool(body, "echo").value_or(false);
  const bool as_ids = GetBool(body, "return_tokens_as_token_ids").value_or(false);
  const std::optional<int64_t> logprobs = GetInt(body, "logprobs");
  if (logprobs) {
    if (*logprobs < 0 || *logprobs > engine::SamplingParams::kMaxLogprobs)
      throw BadRequest("'logprobs' must be in [0, 20]", "logprobs");
    params.logprobs = static_cast<int>(*logprobs);
    if (echo) params.prompt_logprobs = params.logprobs;
  }
  const bool stream = GetBool(body, "stream").value_or(false);
  bool include_usage = false;
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) throw BadRequest("'stream_options' must be an object", "stream_options");
    include_usage = GetBool(*so, "include_usage").value_or(false);
  }
  ValidateSampling(params, ctx);
  auto prompts_ptr = std::make_shared<const std::vector<Prompt>>(ParsePrompts(body, ctx, params.n));
  const std::vector<Prompt>& prompts = *prompts_ptr;

  auto gen = std::make_unique<Generation>(ctx);
  std::vector<std::vector<int32_t>> ids;
  for (const Prompt& p : prompts) ids.push_back(p.ids);
  gen->Start(ids, params, ps.text);

  const size_t n = static_cast<size_t>(params.n);
  auto choices = std::make_shared<std::vector<ChoiceState>>(gen->num_choices());
  for (auto& c : *choices)
    if (params.logprobs >= 0)
      c.logprobs = std::make_unique<CompletionLogprobs>(ctx.tokenizer, params.logprobs, as_ids);
  size_t prompt_tokens = 0;
  for (const Prompt& p : prompts) prompt_tokens += p.ids.size();

  // Adds an update to its choice; returns the text it contributes (echo included).
  auto apply = [choices, prompts_ptr, n, echo](ChoiceUpdate& u) {
    const std::vector<Prompt>& prompts = *prompts_ptr;
    ChoiceState& c = (*choices)[u.choice];
    std::string text;
    if (echo && !c.echoed) {
      c.echoed = true;
      text = prompts[u.choice / n].text;
      if (c.logprobs) {
        const auto& pids = prompts[u.choice / n].ids;
        for (size_t i = 0; i < pids.size(); ++i)
          c.logprobs->Add(i < u.prompt_logprobs.size() ? u.prompt_logprobs[i] : std::nullopt,
                          pids[i]);
      }
    }
    text += u.text;
    if (c.logprobs)
      for (size_t i = 0; i < u.tokens.size() && i < u.logprobs.size(); ++i)
        c.logprobs->Add(u.logprobs[i], u.tokens[i]);
    c.output_tokens = std::max(c.output_tokens, u.output_tokens);
    if (u.finished) c.finish_reason = u.finish_reason;
    return text;
  };

  const std::string id = RandomId("cmpl");
  const int64_t created = UnixSeconds();
  const std::string model = ctx.config.served_model_name;
  if (!stream) {
    const ClientConnection& conn = req.connection;
    std::vector<std::string> texts(gen->num_choices());
    if (!RunToEnd(ctx, *gen, conn, [&](ChoiceUpdate& u) { texts[u.choice] += apply(u); })) {
      res.status = 499;  // client closed; nobody reads this
      return;
    }
    Json out_choices = Json::array();
    size_t completion_tokens = 0;
    for (size_t i = 0; i < choices->size(); ++i) {
      ChoiceState& c = (*choices)[i];
      completion_tokens += c.output_tokens;
      out_choices.push_back({{"index", i},
                             {"text", texts[i]},
                             {"logprobs", c.logprobs ? c.logprobs->Take() : Json(nullptr)},
                             {"finish_reason", c.finish_reason},
                             {"stop_reason", nullptr}});
    }
    Json out = {{"id", id},
                {"object", "text_completion"},
                {"created", created},
                {"model", model},
                {"choices", out_choices},
                {"usage", Usage(prompt_tokens, completion_tokens)}};
    res.SetContent(DumpJson(out), "application/json");
    return;
  }

  auto chunk = [id, created, model](Json choice) {
    return SseEvent({{"id", id},
                     {"object", "text_completion"},
                     {"created", created},
                     {"model", model},
                     {"choices", Json::array({std::move(choice)})}});
  };
  StreamResponse(
      res, std::move(gen),
      [apply, chunk, choices](std::vector<ChoiceUpdate>& updates, auto& write) {
        for (ChoiceUpdate& u : updates) {
          const std::string text = apply(u);
          ChoiceState& c = (*choices)[u.choice];
          Json lp = c.logprobs ? c.logprobs->Take() : Json(nullptr);
          if (text.empty() && !u.finished && (lp.is_null() || lp["tokens"].empty())) continue;
          Json choice = {{"index", u.choice},
                         {"text", text},
                         {"logprobs", lp},
                         {"finish_reason", u.finished ? Json(u.finish_reason) : Json(nullptr)}};
          if (u.finished) choice["stop_reason"] = nullptr;
          if (!write(chunk(std::move(choice)))) return false;
        }
        return true;
      },
      [id, created, model, choices, include_usage, prompt_tokens](auto& write) {
        size_t completion_tokens = 0;
        for (const auto& c : *choices) completion_tokens += c.output_tokens;
        return WriteSseStreamEnd(write, id, "text_completion", created, model, include_usage,
                                 prompt_tokens, completion_tokens);
      });
}

}  // namespace moeserve::server
