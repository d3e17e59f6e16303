#include "tokenizer/post_processors.h"

#include <string>

#include "core/check.h"

namespace moeserve::tokenizer {
namespace {

// Ids before and after the sequence.
class Wrap : public PostProcessor {
 public:
  Wrap(std::vector<int32_t> before, std::vector<int32_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  void Process(std::vector<int32_t>& ids) const override {
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
  }

 private:
  std::vector<int32_t> before_, after_;
};

class Identity : public PostProcessor {
 public:
  void Process(std::vector<int32_t>&) const override {}
};

class Sequence : public PostProcessor {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  void Process(std::vector<int32_t>& ids) const override {
    for (const auto& p : parts_) p->Process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

std::unique_ptr<PostProcessor> MakeTemplate(const nlohmann::json& spec) {
  const auto& single = spec.at("single");
  const auto& specials = spec.value("special_tokens", nlohmann::json::object());
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (const auto& item : single) {
    if (item.contains("Sequence")) {
      if (item["Sequence"].at("id").get<std::string>() != "A") {
        Fail("post_processor TemplateProcessing: single template may only use sequence $A");
      }
      if (seen_sequence) Fail("post_processor TemplateProcessing: $A appears twice");
      seen_sequence = true;
      continue;
    }
    if (!item.contains("SpecialToken")) {
      Fail("post_processor TemplateProcessing: item is neither Sequence nor SpecialToken");
    }
    const std::string name = item["SpecialToken"].at("id").get<std::string>();
    if (!specials.contains(name)) {
      Fail("post_processor TemplateProcessing: special token '", name, "' is not defined");
    }
    for (const auto& id : specials[name].at("ids")) {
      (seen_sequence ? after : before).push_back(id.get<int32_t>());
    }
  }
  if (!seen_sequence) Fail("post_processor TemplateProcessing: single template lacks $A");
  return std::make_unique<Wrap>(std::move(before), std::move(after));
}

}  // namespace

std::unique_ptr<PostProcessor> MakePostProcessor(const nlohmann::json& spec) {
  if (spec.is_null()) return nullptr;
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string()) {
    Fail("tokenizer post_processor: expected an object with a string 'type'");
  }
  const std::string type = spec["type"].get<std::string>();
  try {
    if (type == "TemplateProcessing") return MakeTemplate(spec);
    if (type == "ByteLevel") return std::make_unique<Identity>();
    if (type == "RobertaProcessing" || type == "BertProcessing") {
      return std::make_unique<Wrap>(std::vector<int32_t>{spec.at("cls").at(1).get<int32_t>()},
                                    std::vector<int32_t>{spec.at("sep").at(1).get<int32_t>()});
    }
    if (type == "Sequence") {
      std::vector<std::unique_ptr<PostProcessor>> parts;
      for (const auto& child : spec.at("processors")) {
        auto p = MakePostProcessor(child);
        if (p) parts.push_back(std::move(p));
      }
      return std::make_unique<Sequence>(std::move(parts));
    }
  } catch (const nlohmann::json::exception& e) {
    Fail("tokenizer post_processor ", type, ": malformed: ", e.what());
  }
  Fail("tokenizer: unsupported post_processor type '", type, "'");
}

std::unique_ptr<PostProcessor> MakeBosEosProcessor(std::optional<int32_t> bos,
                                                   std::optional<int32_t> eos) {
  std::vector<int32_t> before, after;
  if (bos) before.push_back(*bos);
  if (eos) after.push_back(*eos);
  return std::make_unique<Wrap>(std::move(before), std::move(after));
}

}  // namespace moeserve::tokenizer
