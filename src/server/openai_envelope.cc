#include "server/openai_envelope.h"

namespace moeserve::server {
namespace {

class OpenAIWriter final : public ResponseWriter {
 public:
  OpenAIWriter(EnvelopeFields fields, std::unique_ptr<ChoiceFormat> format)
      : f_(std::move(fields)), format_(std::move(format)) {}

  void Absorb(ChoiceUpdate& u) override { format_->Absorb(u); }

  Json Body(const Generation& gen) override {
    Json choices = Json::array();
    for (size_t i = 0; i < gen.num_choices(); ++i) choices.push_back(format_->FinalChoice(i));
    Json body = {
        {"id", f_.id},       {"object", f_.object},           {"created", f_.created},
        {"model", f_.model}, {"choices", std::move(choices)}, {"usage", UsageJson(gen.usage())}};
    format_->AddBodyFields(body);
    return body;
  }

  void Stream(std::vector<ChoiceUpdate>& updates, const Generation&, std::string& out) override {
    if (!started_) {
      started_ = true;
      for (Json& choice : format_->StreamStart()) out += Chunk(std::move(choice));
    }
    for (ChoiceUpdate& u : updates) {
      Json choice = format_->ChunkChoice(u);
      if (!choice.is_null()) out += Chunk(std::move(choice));
    }
  }

  void StreamEnd(const Generation& gen, std::string& out) override {
    if (f_.include_usage)
      out += SseEvent({{"id", f_.id},
                       {"object", f_.chunk_object},
                       {"created", f_.created},
                       {"model", f_.model},
                       {"choices", Json::array()},
                       {"usage", UsageJson(gen.usage())}});
    out += kSseDone;
  }

 private:
  std::string Chunk(Json choice) const {
    return SseEvent({{"id", f_.id},
                     {"object", f_.chunk_object},
                     {"created", f_.created},
                     {"model", f_.model},
                     {"choices", Json::array({std::move(choice)})}});
  }

  const EnvelopeFields f_;
  std::unique_ptr<ChoiceFormat> format_;
  bool started_ = false;
};

}  // namespace

std::shared_ptr<ResponseWriter> MakeOpenAIWriter(EnvelopeFields fields,
                                                 std::unique_ptr<ChoiceFormat> format) {
  return std::make_shared<OpenAIWriter>(std::move(fields), std::move(format));
}

Json UsageJson(const TokenUsage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
}

Json StopReasonJson(const ChoiceUpdate& u) {
  if (u.stop_string) return *u.stop_string;
  if (u.stop_token_id >= 0) return u.stop_token_id;
  return nullptr;
}

}  // namespace moeserve::server
