// POST /v1/completions (OpenAI legacy completions, with vLLM's extra sampling fields): the body
// is parsed into a CompletionRequest, its prompts started, and the text answered in the
// text_completion envelope (openai_envelope.h) with the choice objects below.
#include "server/api_error.h"
#include "server/completion_request.h"
#include "server/logprobs_format.h"
#include "server/memory_release.h"
#include "server/openai_envelope.h"
#include "server/routes.h"

namespace moeserve::server {
namespace {

class CompletionChoiceFormat final : public ChoiceFormat {
 public:
  CompletionChoiceFormat(const ServingContext& ctx,
                         std::shared_ptr<const CompletionRequest> request, size_t num_choices)
      : tok_(ctx.tokenizer), request_(std::move(request)), choices_(num_choices) {
    for (Choice& c : choices_)
      if (request_->logprobs >= 0)
        c.logprobs = std::make_unique<CompletionLogprobs>(ctx.tokenizer, request_->logprobs,
                                                          request_->as_token_ids);
  }

  Json ChunkChoice(ChoiceUpdate& u) override {
    const std::string text = Apply(u);
    Choice& c = choices_[u.choice];
    Json lp = c.logprobs ? c.logprobs->Take() : Json(nullptr);
    // As vLLM: a step that generated tokens is a chunk even when their text is held back (an
    // incomplete UTF-8 character, a possible stop-string prefix) and goes out as ""; only an update
    // without tokens (a prefill chunk) is skipped. Skipping held-back tokens delayed first tokens
    // and bunched the stream (a random model's byte tokens: 8-20 chunks for 128 tokens, gaps of
    // seconds), unlike vLLM and llama-server, which both send them.
    if (text.empty() && !u.finished && u.tokens.empty() && (lp.is_null() || lp["tokens"].empty()))
      return nullptr;
    Json choice = {{"index", u.choice},
                   {"text", text},
                   {"logprobs", lp},
                   {"finish_reason", u.finished ? Json(u.finish_reason) : Json(nullptr)}};
    if (u.finished) choice["stop_reason"] = StopReasonJson(u);
    return choice;
  }

  void Absorb(ChoiceUpdate& u) override { choices_[u.choice].text += Apply(u); }

  Json FinalChoice(size_t i) override {
    Choice& c = choices_[i];
    Json choice = {{"index", i},
                   {"text", c.text},
                   {"logprobs", c.logprobs ? c.logprobs->Take() : Json(nullptr)},
                   {"finish_reason", c.last.finish_reason},
                   {"stop_reason", StopReasonJson(c.last)}};
    if (const int k = request_->sampling.prompt_logprobs; k >= 0)
      choice["prompt_logprobs"] = PromptLogprobsJson(
          tok_, c.prompt_logprobs, request_->prompts[i / request_->sampling.params.n].ids, k);
    return choice;
  }

 private:
  struct Choice {
    std::string text;  // whole responses
    std::unique_ptr<CompletionLogprobs> logprobs;
    std::vector<std::optional<engine::TokenLogprobs>> prompt_logprobs;
    ChoiceUpdate last;  // the finishing update
    bool echoed = false;
  };

  // Adds an update to its choice; returns the text it contributes (echo included).
  std::string Apply(ChoiceUpdate& u) {
    Choice& c = choices_[u.choice];
    const size_t n = static_cast<size_t>(request_->sampling.params.n);
    const CompletionPrompt& prompt = request_->prompts[u.choice / n];
    std::string text;
    if (!u.prompt_logprobs.empty()) c.prompt_logprobs = u.prompt_logprobs;
    if (request_->echo && !c.echoed) {
      c.echoed = true;
      text = prompt.text;
      if (c.logprobs)
        for (size_t i = 0; i < prompt.ids.size(); ++i)
          c.logprobs->Add(i < u.prompt_logprobs.size() ? u.prompt_logprobs[i] : std::nullopt,
                          prompt.ids[i]);
    }
    text += u.text;
    if (c.logprobs)
      for (size_t i = 0; i < u.tokens.size() && i < u.logprobs.size(); ++i)
        c.logprobs->Add(u.logprobs[i], u.tokens[i]);
    if (u.finished) {
      c.last = u;
      c.last.text.clear();
    }
    return text;
  }

  const tokenizer::Tokenizer& tok_;
  std::shared_ptr<const CompletionRequest> request_;
  std::vector<Choice> choices_;
};

}  // namespace

void HandleCompletions(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const ReleaseAfterLargeRequest release_memory(req.body.size());  // destroyed last
  const Json body = ParseBody(req.body);
  CheckModel(body, ctx);
  auto request = std::make_shared<const CompletionRequest>(ParseCompletionRequest(body, ctx));
  auto gen = std::make_unique<Generation>(ctx);
  std::vector<std::vector<int32_t>> ids;
  for (const CompletionPrompt& p : request->prompts) ids.push_back(p.ids);
  gen->Start(ids, request->sampling.params, request->sampling.text);
  EnvelopeFields fields{.id = RandomId("cmpl-"),
                        .object = "text_completion",
                        .chunk_object = "text_completion",
                        .created = UnixSeconds(),
                        .model = ctx.config.served_model_name,
                        .include_usage = request->include_usage};
  auto format = std::make_unique<CompletionChoiceFormat>(ctx, request, gen->num_choices());
  Respond(ctx, req, res, std::move(gen), MakeOpenAIWriter(std::move(fields), std::move(format)),
          request->stream);
}

}  // namespace moeserve::server
