// Hugging Face tokenizer.json loader and runner, byte-exact with the `tokenizers` library for
// byte-level BPE models (GPT-2 / GPT-4o / Llama 3 / Qwen / MiniMax).
//
// Encode pipeline (as in the reference): added tokens that are not `normalized` are cut out of
// the raw text; the rest is normalized; `normalized` added tokens are cut out of that; the
// remaining segments are pre-tokenized into words; the model turns each word into ids; with
// add_special_tokens the post-processor adds BOS/EOS.
//
// Thread safety: a loaded Tokenizer is immutable except for the internal BPE word cache, which
// is internally synchronized, so all const methods may be called from many threads at once.
// Input text that is not valid UTF-8 is first made valid by replacing invalid sequences with
// U+FFFD (the reference only accepts valid strings).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace moeserve::tokenizer {

class BpeModel;
class Normalizer;
class PreTokenizer;
class PostProcessor;
class Decoder;
class AddedTokenMatcher;
struct AddedToken;

class Tokenizer {
 public:
  // Loads tokenizer.json and, when given (or found next to it by FromModelDir),
  // tokenizer_config.json. Throws moeserve::Error naming the failing component.
  static Tokenizer FromFile(const std::string& tokenizer_json_path,
                            const std::string& tokenizer_config_path = "");
  // `dir`/tokenizer.json plus `dir`/tokenizer_config.json when present.
  static Tokenizer FromModelDir(const std::string& dir);
  // Same from already-parsed JSON (config may be null).
  static Tokenizer FromJson(const nlohmann::json& tokenizer_json,
                            const nlohmann::json& tokenizer_config = nullptr);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens = true) const;
  // Unknown ids are skipped, as in the reference.
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // The bytes token `id` stands for in a decoded text (byte-level: its raw bytes, possibly part of
  // a UTF-8 character; otherwise its decoded text). Empty for an unknown id.
  std::string TokenBytes(int32_t id) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  // Empty string for an unknown id.
  std::string IdToToken(int32_t id) const;
  // One past the largest id of the model vocab and the added tokens (the embedding rows a model
  // needs), which can exceed the number of tokens when ids have gaps.
  size_t VocabSize() const;
  bool IsSpecial(int32_t id) const;
  // From tokenizer_config.json bos_token / eos_token (string or {"content": ...}).
  std::optional<int32_t> BosId() const { return bos_id_; }
  std::optional<int32_t> EosId() const { return eos_id_; }
  // tokenizer_config.json contents, or an empty object.
  const nlohmann::json& Config() const { return config_; }

  // Token ids of the added tokens, in file order (for chat templates and stop tokens).
  const std::vector<AddedToken>& AddedTokens() const { return *added_tokens_; }

 private:
  friend class StreamingDetokenizer;
  Tokenizer();
  void EncodeSegment(std::string_view text, bool at_input_start, std::vector<int32_t>& ids) const;
  void PreTokenizeAndModel(std::string_view text, bool at_input_start,
                           std::vector<int32_t>& ids) const;
  // Token string for decoding: added-token content first, then the model vocab.
  const std::string* DecodeToken(int32_t id) const;
  bool SkipOnDecode(int32_t id, bool skip_special_tokens) const;

  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<std::vector<AddedToken>> added_tokens_;
  std::unique_ptr<AddedTokenMatcher> raw_matcher_;         // normalized == false
  std::unique_ptr<AddedTokenMatcher> normalized_matcher_;  // normalized == true
  std::unordered_map<int32_t, size_t> added_by_id_;        // id -> index in added_tokens_
  std::vector<bool> special_;                              // by id
  // Per-id bytes for a ByteLevel decoder (empty when the decoder is something else).
  std::vector<std::string> byte_level_bytes_;
  size_t id_limit_ = 0;
  std::optional<int32_t> bos_id_, eos_id_;
  nlohmann::json config_ = nlohmann::json::object();
};

// Incremental detokenization for streaming generation: Push returns only text that can no
// longer change (whole UTF-8 characters), Flush the rest. The concatenation of everything
// returned equals tokenizer.Decode(all ids, skip_special_tokens). Not thread-safe; one per
// stream. Byte-level decoders cost O(1) per token; other decoders re-decode the stream.
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens);
  std::string Push(int32_t id);
  std::string Flush();

 private:
  std::string DrainByteLevel(bool final);
  const Tokenizer& tok_;
  bool skip_special_;
  std::string pending_bytes_;  // byte-level: bytes not yet emitted
  std::vector<int32_t> ids_;   // generic: every id so far
  std::string emitted_;        // generic: decoded text already returned
};

}  // namespace moeserve::tokenizer
