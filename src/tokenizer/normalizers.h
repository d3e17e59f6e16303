// Normalizers of tokenizer.json ("normalizer"): NFC, NFD, NFKC, NFKD, Lowercase, Replace,
// Prepend, Strip, StripAccents and Sequence. They rewrite whole segments of valid UTF-8 (the
// text between added tokens); offsets are not tracked because the engine needs only ids.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace moeserve::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void Normalize(std::string& text) const = 0;
};

// Builds the normalizer described by `spec`; null JSON gives nullptr. Throws moeserve::Error
// ("unsupported normalizer type 'X'") for anything else.
std::unique_ptr<Normalizer> MakeNormalizer(const nlohmann::json& spec);

}  // namespace moeserve::tokenizer
