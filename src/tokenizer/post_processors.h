// Post-processors of tokenizer.json ("post_processor"): TemplateProcessing (single sequence),
// ByteLevel (ids unchanged), RobertaProcessing / BertProcessing and Sequence. They run only when
// special tokens are requested.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

namespace moeserve::tokenizer {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void Process(std::vector<int32_t>& ids) const = 0;
};

std::unique_ptr<PostProcessor> MakePostProcessor(const nlohmann::json& spec);

// The template transformers builds from tokenizer_config.json's add_bos_token / add_eos_token:
// [bos] $A [eos].
std::unique_ptr<PostProcessor> MakeBosEosProcessor(std::optional<int32_t> bos,
                                                   std::optional<int32_t> eos);

}  // namespace moeserve::tokenizer
