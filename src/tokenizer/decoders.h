// Decoders of tokenizer.json ("decoder"): ByteLevel, ByteFallback, Fuse, Strip, Replace,
// Metaspace and Sequence. Each rewrites the list of token strings; the result is their
// concatenation (the reference's decode_chain followed by join).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace moeserve::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void DecodeChain(std::vector<std::string>& tokens) const = 0;
  // True for a plain ByteLevel decoder: the text is then the lossy UTF-8 of the concatenated
  // per-token bytes, which lets Decode and the streaming detokenizer work token by token.
  virtual bool IsByteLevel() const { return false; }
};

// Null JSON gives nullptr (tokens are then joined with spaces, as the reference does).
std::unique_ptr<Decoder> MakeDecoder(const nlohmann::json& spec);

// Bytes a ByteLevel decoder produces for one token (its chars mapped back to bytes, or the
// token's own UTF-8 when it has a char outside the byte alphabet).
std::string ByteLevelTokenBytes(const std::string& token);

}  // namespace moeserve::tokenizer
